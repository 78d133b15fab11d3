import APNsMock
import Foundation
import Testing
import TestSupport

/// Each request rule of APNS-PROTOCOL.md, one bad request at a time, over a real
/// HTTP/2 + TLS connection made by curl.
@Suite struct ValidationTests {
    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let status: Int
        let reason: String
        let request: @Sendable () -> Request
        var testDescription: String { name }
    }

    static let base = Request()
    static let cases: [Case] = [
        Case(name: "GET is MethodNotAllowed", status: 405, reason: "MethodNotAllowed") {
            var r = base; r.method = "GET"; r.body = nil; return r },
        Case(name: "other path is BadPath", status: 404, reason: "BadPath") {
            var r = base; r.path = "/3/devices/\(Fixture.token)"; return r },
        Case(name: "/3/device/ is MissingDeviceToken", status: 400, reason: "MissingDeviceToken") {
            var r = base; r.path = "/3/device/"; return r },
        Case(name: "upper-case token is BadDeviceToken", status: 400, reason: "BadDeviceToken") {
            var r = base; r.path = "/3/device/\(Fixture.token.uppercased())"; return r },
        Case(name: "62 hex digits is BadDeviceToken", status: 400, reason: "BadDeviceToken") {
            var r = base; r.path = "/3/device/\(String(repeating: "ab", count: 31))"; return r },
        Case(name: "odd length is BadDeviceToken", status: 400, reason: "BadDeviceToken") {
            var r = base; r.path = "/3/device/\(Fixture.token)a"; return r },
        Case(name: "a token with a g is BadDeviceToken", status: 400, reason: "BadDeviceToken") {
            var r = base; r.path = "/3/device/\(Fixture.token.dropLast())g"; return r },
        Case(name: "202 hex digits is BadDeviceToken", status: 400, reason: "BadDeviceToken") {
            var r = base; r.path = "/3/device/\(String(repeating: "ab", count: 101))"; return r },
        Case(name: "repeated apns-topic is DuplicateHeaders", status: 400, reason: "DuplicateHeaders") {
            var r = base; r.headers.append("apns-topic: \(Fixture.pki.topic)"); return r },
        Case(name: "no apns-topic is MissingTopic", status: 400, reason: "MissingTopic") {
            base.with("apns-topic", nil) },
        Case(name: "unknown bundle id is TopicDisallowed", status: 400, reason: "TopicDisallowed") {
            base.with("apns-topic", "com.example.unknown") },
        Case(name: "voip to the plain bundle id is DeviceTokenNotForTopic", status: 400,
             reason: "DeviceTokenNotForTopic") { base.with("apns-push-type", "voip") },
        Case(name: "alert to the .voip topic is DeviceTokenNotForTopic", status: 400,
             reason: "DeviceTokenNotForTopic") { base.with("apns-topic", "\(Fixture.pki.topic).voip") },
        Case(name: "a space in the topic is BadTopic", status: 400, reason: "BadTopic") {
            base.with("apns-topic", "com.example app") },
        Case(name: "unknown push type is InvalidPushType", status: 400, reason: "InvalidPushType") {
            base.with("apns-push-type", "banner") },
        Case(name: "no push type is InvalidPushType", status: 400, reason: "InvalidPushType") {
            base.with("apns-push-type", nil) },
        Case(name: "upper-case apns-id is BadMessageId", status: 400, reason: "BadMessageId") {
            base.with("apns-id", "6E789E6A-A1B9-45F4-86C4-5D188009454F") },
        Case(name: "a g in the apns-id's last group is BadMessageId", status: 400, reason: "BadMessageId") {
            base.with("apns-id", "6e789e6a-a1b9-45f4-86c4-5d188009454g") },
        Case(name: "an apns-id with a dash one place off is BadMessageId", status: 400, reason: "BadMessageId") {
            base.with("apns-id", "6e789e6a-a1b945-f4-86c4-5d188009454f") },
        Case(name: "an apns-id of 35 characters is BadMessageId", status: 400, reason: "BadMessageId") {
            base.with("apns-id", "6e789e6a-a1b9-45f4-86c4-5d188009454") },
        Case(name: "priority 7 is BadPriority", status: 400, reason: "BadPriority") {
            base.with("apns-priority", "7") },
        Case(name: "background at priority 10 is BadPriority", status: 400, reason: "BadPriority") {
            base.with("apns-push-type", "background").with("apns-priority", "10") },
        Case(name: "non-integer expiration is BadExpirationDate", status: 400, reason: "BadExpirationDate") {
            base.with("apns-expiration", "tomorrow") },
        Case(name: "65-byte collapse id is BadCollapseId", status: 400, reason: "BadCollapseId") {
            base.with("apns-collapse-id", String(repeating: "c", count: 65)) },
        Case(name: "empty body is PayloadEmpty", status: 400, reason: "PayloadEmpty") {
            var r = base; r.body = nil; return r },
        Case(name: "4097 bytes is PayloadTooLarge", status: 413, reason: "PayloadTooLarge") {
            var r = base; r.body = paddedPayload(4097); return r },
        Case(name: "5121 bytes of voip is PayloadTooLarge", status: 413, reason: "PayloadTooLarge") {
            var r = base.with("apns-push-type", "voip").with("apns-topic", "\(Fixture.pki.topic).voip")
            r.body = paddedPayload(5121); return r },
        Case(name: "a JSON array is BadPayload", status: 400, reason: "BadPayload") {
            var r = base; r.body = Data("[1,2]".utf8); return r },
        Case(name: "broken JSON is BadPayload", status: 400, reason: "BadPayload") {
            var r = base; r.body = Data(#"{"aps":{"alert":"hi"}"#.utf8); return r },
        Case(name: "trailing garbage is BadPayload", status: 400, reason: "BadPayload") {
            var r = base; r.body = Data(#"{"aps":{}} x"#.utf8); return r },
    ]

    /// A JSON object of exactly `size` bytes.
    static func paddedPayload(_ size: Int) -> Data {
        let shell = #"{"aps":{},"p":""}"#
        return Data(#"{"aps":{},"p":"\#(String(repeating: "x", count: size - shell.count))"}"#.utf8)
    }

    @Test("APNs answers a bad request with its status and reason", arguments: cases)
    func rejects(_ c: Case) throws {
        let mock = try Fixture.mock()
        let answer = curl(mock.port, c.request())
        #expect(answer.status == c.status)
        #expect(answer.reason == c.reason)
        // "Errors: apns-id header and JSON body {"reason":"..."}"
        #expect(answer.headers["content-type"] == "application/json")
        #expect(answer.headers["apns-id"]?.count == 36)
        #expect(mock.statistics().byReason[c.reason] == 1)
    }

    @Test("Limits are inclusive: 4096 bytes, 5120 for voip, 64-byte collapse id, 200-digit token")
    func acceptsAtTheLimits() throws {
        let mock = try Fixture.mock()
        var alert = Self.base.with("apns-collapse-id", String(repeating: "c", count: 64))
        alert.body = Self.paddedPayload(4096)
        var voip = Self.base.with("apns-push-type", "voip").with("apns-topic", "\(Fixture.pki.topic).voip")
        voip.body = Self.paddedPayload(5120)
        var long = Self.base
        long.path = "/3/device/\(String(repeating: "0f", count: 100))"
        let background = Self.base.with("apns-push-type", "background").with("apns-priority", "5")
            .with("apns-expiration", "0")
        let (answers, _) = curl(mock.port, [alert, voip, long, background])
        #expect(answers.map(\.status) == [200, 200, 200, 200])
    }

    @Test("Every push type is accepted with its topic suffix", arguments: [
        ("alert", ""), ("background", ""), ("mdm", ""), ("voip", ".voip"), ("complication", ".complication"),
        ("fileprovider", ".pushkit.fileprovider"), ("location", ".location-query"), ("pushtotalk", ".voip-ptt"),
        ("liveactivity", ".push-type.liveactivity"), ("widgets", ".push-type.widgets"),
        ("controls", ".push-type.controls"), ("accessory", ".push-type.accessory"),
    ])
    func pushTypeSuffixes(_ type: String, _ suffix: String) throws {
        let mock = try Fixture.mock()
        var r = Self.base.with("apns-push-type", type).with("apns-topic", Fixture.pki.topic + suffix)
        if type == "background" { r = r.with("apns-priority", "5") }
        if type == "widgets" { r.body = Data(#"{"aps":{"content-changed":true}}"#.utf8) }
        #expect(curl(mock.port, r).status == 200)
        // The plain bundle id is not this push type's topic.
        if !suffix.isEmpty {
            #expect(curl(mock.port, r.with("apns-topic", Fixture.pki.topic)).reason == "DeviceTokenNotForTopic")
        }
    }

    @Test("A widgets push carries {\"aps\":{\"content-changed\":true}} (white space aside), else 400 BadPayload")
    func widgetsBody() throws {
        let mock = try Fixture.mock()
        defer { mock.stop() }
        let widgets = Self.base.with("apns-push-type", "widgets").with("apns-topic", "\(Fixture.pki.topic).push-type.widgets")
        func with(_ body: String) -> Request {
            var r = widgets
            r.body = Data(body.utf8)
            return r
        }
        let (answers, _) = curl(mock.port, [
            with(#"{"aps":{"content-changed":true}}"#), with(" {\n \"aps\" : { \"content-changed\" : true } }\n"),
            with(#"{"aps":{"content-changed":false}}"#), with(#"{"aps":{"alert":"hi"}}"#),
            with(#"{"aps":{"content-changed":true},"x":1}"#), with(#"{"aps":{"content-changed ":true}}"#),
        ])
        #expect(answers.map(\.status) == [200, 200, 400, 400, 400, 400])
        #expect(answers.dropFirst(2).allSatisfy { $0.reason == "BadPayload" })
    }
}
