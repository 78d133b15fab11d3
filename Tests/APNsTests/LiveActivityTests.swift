import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// Live Activity payloads (APNS-PROTOCOL.md, "Live Activities"): typed in `APS`,
/// checked when made or read from a file, and sent with the headers APNs wants.
@Suite struct LiveActivityTests {
    static let start = try! LiveActivity(
        event: .start, timestamp: 1_790_000_000, contentState: .object([("status", "preparing"), ("eta_minutes", 25)]),
        staleDate: 1_790_003_600, relevanceScore: 75, attributesType: "OrderActivityAttributes",
        attributes: .object([("order_number", "1234")]), alert: .init(title: "Order #1234", body: "Being prepared"),
        inputPushToken: true)

    @Test func aStartRendersEveryDocumentedKey() throws {
        let payload = Payload(aps: APS(liveActivity: Self.start))
        #expect(String(decoding: payload.bytes, as: UTF8.self) == #"{"aps":{"alert":{"title":"Order #1234","body":"Being prepared"},"timestamp":1790000000,"event":"start","content-state":{"status":"preparing","eta_minutes":25},"stale-date":1790003600,"relevance-score":75.0,"attributes-type":"OrderActivityAttributes","attributes":{"order_number":"1234"},"input-push-token":1}}"#)
        #expect(try LiveActivity.check(payload) == .start)
    }

    /// A start may subscribe the activity to a broadcast channel (`input-push-channel`,
    /// its base64 id) instead of asking for a token of its own.
    @Test func aStartMaySubscribeToAChannel() throws {
        let channel = "dHN0LTEyMzQ1Njc4OTAxMg=="
        let start = try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributesType: "A",
                                     attributes: .object([]), alert: .init(title: "t"), inputPushChannel: channel)
        let payload = Payload(aps: APS(liveActivity: start))
        #expect(String(decoding: payload.bytes, as: UTF8.self).hasSuffix(#","input-push-channel":"\#(channel)"}}"#))
        #expect(try LiveActivity.check(payload) == .start)

        #expect(throws: LiveActivity.Error.tokenAndChannel) {
            try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributesType: "A",
                             attributes: .object([]), alert: .init(title: "t"), inputPushToken: true,
                             inputPushChannel: channel)
        }
        #expect(throws: LiveActivity.Error.onlyForStart("input-push-channel")) {
            try LiveActivity(event: .update, timestamp: 1, contentState: .object([]), inputPushChannel: channel)
        }
        for bad in ["", "not base64!", "abc", String(repeating: "QUFB", count: 16)] {
            #expect(throws: LiveActivity.Error.badChannelID, "\(bad)") {
                try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributesType: "A",
                                 attributes: .object([]), alert: .init(title: "t"), inputPushChannel: bad)
            }
        }
    }

    /// The same rules for a payload written by hand.
    @Test func aHandWrittenChannelStartIsChecked() throws {
        let start = #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"t"},"#
        #expect(try LiveActivity.check(Payload(json: start + #""input-push-channel":"dHN0LTEyMzQ1Njc4OTAxMg=="}}"#)) == .start)
        #expect(throws: LiveActivity.Error.badChannelID) {
            try LiveActivity.check(Payload(json: start + #""input-push-channel":42}}"#))
        }
        #expect(throws: LiveActivity.Error.tokenAndChannel) {
            try LiveActivity.check(Payload(json: start + #""input-push-token":1,"input-push-channel":"dHN0"}}"#))
        }
        #expect(throws: LiveActivity.Error.onlyForStart("input-push-channel")) {
            try LiveActivity.check(Payload(json: #"{"aps":{"timestamp":1,"event":"update","content-state":{},"input-push-channel":"dHN0"}}"#))
        }
    }

    @Test func anEndRendersItsDismissalDate() throws {
        let end = try LiveActivity(event: .end, timestamp: 5, contentState: .object([]), dismissalDate: 60)
        let text = String(decoding: Payload(aps: APS(liveActivity: end)).bytes, as: UTF8.self)
        #expect(text == #"{"aps":{"timestamp":5,"event":"end","content-state":{},"dismissal-date":60}}"#)
    }

    /// "an event is required; start needs attributes-type and attributes" (and an alert).
    @Test func theRulesAreCheckedWhenMade() {
        #expect(throws: LiveActivity.Error.startNeeds("attributes-type")) {
            try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributes: .object([]),
                             alert: .init(title: "t"))
        }
        #expect(throws: LiveActivity.Error.startNeeds("attributes")) {
            try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributesType: "A",
                             alert: .init(title: "t"))
        }
        #expect(throws: LiveActivity.Error.startNeeds("alert")) {
            try LiveActivity(event: .start, timestamp: 1, contentState: .object([]), attributesType: "A",
                             attributes: .object([]))
        }
        #expect(throws: LiveActivity.Error.missingContentState(.update)) {
            try LiveActivity(event: .update, timestamp: 1)
        }
        #expect(throws: LiveActivity.Error.onlyForStart("attributes-type")) {
            try LiveActivity(event: .update, timestamp: 1, contentState: .object([]), attributesType: "A")
        }
        #expect(throws: LiveActivity.Error.onlyForEnd("dismissal-date")) {
            try LiveActivity(event: .update, timestamp: 1, contentState: .object([]), dismissalDate: 2)
        }
        #expect(throws: LiveActivity.Error.notAnObject("content-state")) {
            try LiveActivity(event: .update, timestamp: 1, contentState: "text")
        }
    }

    /// Payloads written by hand (the CLI's files, an API's JSON) follow the same rules.
    @Test func handWrittenPayloadsAreChecked() throws {
        let cases: [(String, LiveActivity.Error)] = [
            (#"{"aps":{"timestamp":1,"content-state":{}}}"#, .missingEvent),
            (#"{"aps":{"timestamp":1,"event":"begin","content-state":{}}}"#, .unknownEvent("begin")),
            (#"{"aps":{"event":"update","content-state":{}}}"#, .missingTimestamp),
            (#"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes":{},"alert":"x"}}"#, .startNeeds("attributes-type")),
            (#"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","alert":"x"}}"#, .startNeeds("attributes")),
            (#"{"aps":{"timestamp":"1","event":"update","content-state":{}}}"#, .notANumber("timestamp")),
            (#"{"aps":{"timestamp":1,"event":"update","content-state":[1]}}"#, .notAnObject("content-state")),
            (#"{"alert":"no aps"}"#, .missingEvent),
        ]
        for (json, error) in cases {
            #expect(throws: error, "\(json)") { try LiveActivity.check(Payload(json: json)) }
        }
        // A key named "event" inside content-state is not aps.event.
        #expect(throws: LiveActivity.Error.missingEvent) {
            try LiveActivity.check(Payload(json: #"{"aps":{"timestamp":1,"content-state":{"event":"update"}}}"#))
        }
        for file in ["examples/liveactivity-start.json", "examples/liveactivity-update.json"] {
            let bytes = try #require(FileManager.default.contents(atPath: Package.fixture(file)))
            #expect(throws: Never.self, "\(file)") { try LiveActivity.check(Payload(json: bytes)) }
        }
    }

    @Test func theTopicGetsItsSuffix() throws {
        #expect(PushType.liveActivityTopic(bundleID: "com.a.b") == "com.a.b.push-type.liveactivity")
        #expect(PushType.liveActivityTopic(bundleID: "com.a.b.push-type.liveactivity") == "com.a.b.push-type.liveactivity")
    }

    /// "The topic is <bundle>.push-type.liveactivity and the push type is liveactivity."
    @Test(arguments: Transport.allCases)
    func aLiveActivityPushGoesOutWithItsTopicAndType(transport: Transport) async throws {
        let mock = try Harness.mock { $0.recordRequests = true }
        let client = try Harness.client(mock, transport: transport)
        let update = try LiveActivity(event: .update, timestamp: 1_790_000_600,
                                      contentState: .object([("status", "ready")]), relevanceScore: 100)
        let note = try Notification(topic: TestPKI.shared.topic, pushType: .liveactivity, priority: .immediate,
                                    payload: Payload(aps: APS(liveActivity: update)))
        let token = Harness.tokens(1)[0]
        let result = try await client.send(note, to: token)
        await client.shutdown()
        #expect(result.status == 200)
        let request = try #require(mock.recordedRequests().first)
        #expect(request.path == "/3/device/\(token)")
        #expect(request.header("apns-topic") == "\(TestPKI.shared.topic).push-type.liveactivity")
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.body == note.payload.bytes)
    }
}
