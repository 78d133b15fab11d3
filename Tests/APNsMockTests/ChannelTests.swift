import APNsMock
import Foundation
import TestSupport
import Testing

/// The mock's broadcast channels (iOS 18), driven by curl over real TLS: every
/// status, header and body APNS-PROTOCOL.md's "Broadcast push (iOS 18)" lists.
@Suite struct ChannelTests {
    static let bundle = Fixture.pki.topic
    static let channels = "/1/apps/\(bundle)/channels"
    static let allChannels = "/1/apps/\(bundle)/all-channels"
    static let broadcasts = "/4/broadcasts/apps/\(bundle)"
    static let auth = "authorization: bearer \(Fixture.goodJWT)"

    static func create(policy: Int = 1, pushType: String = "LiveActivity") -> Request {
        Request(method: "POST", path: channels, headers: [auth],
                body: Data(#"{"message-storage-policy":\#(policy),"push-type":"\#(pushType)"}"#.utf8))
    }

    static func manage(_ method: String, _ path: String = channels, channel: String?) -> Request {
        var r = Request(method: method, path: path, headers: [auth], body: nil)
        if let channel { r = r.with("apns-channel-id", channel) }
        return r
    }

    static func broadcast(_ channel: String?, expiration: String? = "0", pushType: String? = "liveactivity",
                          body: Data = Data(#"{"aps":{"timestamp":1,"event":"update","content-state":{}}}"#.utf8)) -> Request {
        var r = Request(method: "POST", path: broadcasts, headers: [auth, "apns-priority: 10"], body: body)
        if let channel { r = r.with("apns-channel-id", channel) }
        if let expiration { r = r.with("apns-expiration", expiration) }
        if let pushType { r = r.with("apns-push-type", pushType) }
        return r
    }

    static func isBase64ID(_ s: String?) -> Bool {
        guard let s, s.count == 24, s.hasSuffix("==") else { return false }
        return Data(base64Encoded: s)?.count == 16
    }

    /// "create ... 201 and the new id in the apns-channel-id header"; read, list,
    /// delete (204) and the request id echoed on every answer.
    @Test func aChannelIsCreatedReadListedAndDeleted() throws {
        let mock = try Fixture.mock()
        let requestID = "0b7a9a6e-3b1c-4d2e-9f00-123456789abc"
        let created = curl(mock.port, Self.create(policy: 1).with("apns-request-id", requestID))
        #expect(created.status == 201)
        #expect(created.body.isEmpty)
        #expect(created.headers["apns-request-id"] == requestID)
        let id = try #require(created.headers["apns-channel-id"])
        #expect(Self.isBase64ID(id), "a channel id is base64: \(id)")

        let (answers, _) = curl(mock.port, [
            Self.manage("GET", channel: id),
            Self.manage("GET", Self.allChannels, channel: nil),
            Self.manage("DELETE", channel: id),
            Self.manage("GET", channel: id),
            Self.manage("GET", Self.allChannels, channel: nil),
        ])
        try #require(answers.count == 5)
        #expect(answers[0].status == 200)
        #expect(answers[0].json?["message-storage-policy"] as? Int == 1)
        #expect(answers[0].json?["push-type"] as? String == "LiveActivity")
        #expect(answers[1].status == 200)
        #expect(answers[1].json?["channels"] as? [String] == [id])
        #expect(answers[2].status == 204)
        #expect(answers[2].body.isEmpty)
        #expect(answers[3].status == 400 && answers[3].reason == "ChannelNotRegistered")
        #expect(answers[4].json?["channels"] as? [String] == [])
        for a in answers {
            let rid = a.headers["apns-request-id"] ?? ""
            #expect(rid.range(of: #"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"#,
                              options: .regularExpression) != nil, "apns-request-id on every answer")
        }
        let stats = mock.statistics()
        #expect(stats.channelsCreated == 1 && stats.channelsDeleted == 1 && stats.channelsCurrent == 0)
    }

    /// Each documented reason, with its status.
    @Test func everyReasonHasItsStatus() throws {
        let mock = try Fixture.mock()
        let id = try #require(curl(mock.port, Self.create(policy: 0)).headers["apns-channel-id"])
        let unknown = "c29tZUNoYW5uZWw="         // Apple's example id: base64, never issued here
        let cases: [(String, Request, Int, String)] = [
            ("read without an id", Self.manage("GET", channel: nil), 400, "MissingChannelId"),
            ("delete without an id", Self.manage("DELETE", channel: nil), 400, "MissingChannelId"),
            ("an id that is not base64", Self.manage("GET", channel: "not base64!"), 400, "BadChannelId"),
            ("an id of the wrong length", Self.manage("GET", channel: "abc"), 400, "BadChannelId"),
            ("an id never issued", Self.manage("GET", channel: unknown), 400, "ChannelNotRegistered"),
            ("create with another push-type", Self.create(pushType: "Alert"), 400, "InvalidPushType"),
            ("create with policy 2", Self.create(policy: 2), 400, "BadPayload"),
            ("another method", Self.manage("PUT", channel: id), 405, "MethodNotAllowed"),
            ("list by POST", Request(method: "POST", path: Self.allChannels, headers: [Self.auth], body: Data("{}".utf8)),
             405, "MethodNotAllowed"),
            ("an app not configured", Request(method: "POST", path: "/1/apps/com.other.app/channels",
                                              headers: [Self.auth], body: Self.create().body), 400, "TopicDisallowed"),
            ("no provider token", Self.create().with("authorization", nil), 403, "MissingProviderToken"),
            ("a broadcast without a channel", Self.broadcast(nil), 400, "MissingChannelId"),
            ("a broadcast to a bad id", Self.broadcast("%%%%"), 400, "BadChannelId"),
            ("a broadcast to an unknown channel", Self.broadcast(unknown), 400, "ChannelNotRegistered"),
            ("a broadcast of type alert", Self.broadcast(id, pushType: "alert"), 400, "InvalidPushType"),
            ("a broadcast without a push type", Self.broadcast(id, pushType: nil), 400, "InvalidPushType"),
            ("a later expiration on a no-storage channel", Self.broadcast(id, expiration: "1900000000"), 400, "BadExpirationDate"),
            ("no expiration on a no-storage channel", Self.broadcast(id, expiration: nil), 400, "BadExpirationDate"),
            ("an empty broadcast", Self.broadcast(id, body: Data()), 400, "PayloadEmpty"),
            ("a broadcast of 5,121 bytes", Self.broadcast(id, body: Self.payload(5121)), 413, "PayloadTooLarge"),
            ("a broadcast by GET", Request(method: "GET", path: Self.broadcasts, headers: [Self.auth], body: nil),
             405, "MethodNotAllowed"),
        ]
        let (answers, _) = curl(mock.port, cases.map(\.1))
        try #require(answers.count == cases.count)
        for ((what, _, status, reason), answer) in zip(cases, answers) {
            #expect(answer.status == status, "\(what)")
            #expect(answer.reason == reason, "\(what)")
            #expect(answer.headers["apns-request-id"] != nil, "\(what)")
        }
    }

    /// A JSON object of exactly `size` bytes.
    static func payload(_ size: Int) -> Data {
        let head = #"{"aps":{"timestamp":1,"event":"update","content-state":{"pad":""#
        let tail = #""}}}"#
        return Data((head + String(repeating: "x", count: size - head.utf8.count - tail.utf8.count) + tail).utf8)
    }

    /// "The payload may be up to 5,120 bytes"; the answer "carries apns-request-id and
    /// apns-unique-id"; a storing channel takes a later expiration.
    @Test func aBroadcastIsAnsweredWithRequestAndUniqueIDs() throws {
        let mock = try Fixture.mock { $0.recordRequests = true }
        let noStorage = try #require(curl(mock.port, Self.create(policy: 0)).headers["apns-channel-id"])
        let storing = try #require(curl(mock.port, Self.create(policy: 1)).headers["apns-channel-id"])
        let (answers, _) = curl(mock.port, [
            Self.broadcast(noStorage, body: Self.payload(5120)),
            Self.broadcast(storing, expiration: "1900000000"),
        ])
        try #require(answers.count == 2)
        for a in answers {
            #expect(a.status == 200)
            #expect(a.headers["apns-request-id"] != nil)
            #expect(a.headers["apns-unique-id"] != nil)
        }
        let sends = mock.recordedRequests().filter { $0.path == Self.broadcasts }
        #expect(sends.count == 2 && sends.allSatisfy { $0.status == 200 })
    }

    @Test func aBundleWithoutTheFeatureIsRefused() throws {
        let mock = try Fixture.mock { $0.broadcastEnabled = false }
        let (answers, _) = curl(mock.port, [Self.create(), Self.manage("GET", Self.allChannels, channel: nil),
                                            Self.broadcast("c29tZUNoYW5uZWw=")])
        #expect(answers.count == 3)
        #expect(answers.allSatisfy { $0.status == 400 && $0.reason == "FeatureNotEnabled" })
    }

    /// "up to 10,000 channels for your app": the 10,001st create is refused and
    /// nothing is lost (every other create answered 201, each with its own id).
    @Test func theTenThousandAndFirstChannelIsRefused() throws {
        let mock = try Fixture.mock()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("chan-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let body = dir.appendingPathComponent("body.json")
        try Data(#"{"message-storage-policy":0,"push-type":"LiveActivity"}"#.utf8).write(to: body)
        // 10,001 creates one after another, 500 per curl run (one connection each): curl
        // 7.88 resets every stream it finished, and past nghttp2's burst of 1,000 resets
        // the mock's HTTP/2 layer drops the connection, losing the answer in flight.
        let url = "https://127.0.0.1:\(mock.port)\(Self.channels)"
        var codes: [String] = []
        var stderr = ""
        for batch in stride(from: 0, to: 10_001, by: 500) {
            var config = """
                http2
                silent
                show-error
                cacert = "\(Fixture.pki.caFile)"
                request = POST
                header = "\(Self.auth)"
                header = "content-type:"
                data-binary = "@\(body.path)"
                write-out = "%{http_code}\\n"

                """
            for _ in batch..<min(batch + 500, 10_001) { config += "url = \"\(url)\"\n" }
            let file = dir.appendingPathComponent("curl.cfg")
            try Data(config.utf8).write(to: file)
            let result = runSync("/usr/bin/curl", ["-K", file.path], timeout: 300)
            codes += result.stdout.split(separator: "\n").map(String.init)
            stderr += result.stderr
        }
        #expect(codes.count == 10_001)
        #expect(codes.filter { $0 == "201" }.count == 10_000, "\(Set(codes)) \(stderr.prefix(300))")
        // A 201 has no body; the refusal's body precedes its status on the line.
        #expect(codes.last == #"{"reason":"CannotCreateChannelConfig"}400"#, "the 10,001st")

        let refused = curl(mock.port, Self.create())
        #expect(refused.status == 400 && refused.reason == "CannotCreateChannelConfig")
        let list = curl(mock.port, Self.manage("GET", Self.allChannels, channel: nil))
        let ids = list.json?["channels"] as? [String] ?? []
        #expect(ids.count == 10_000 && Set(ids).count == 10_000)
        let stats = mock.statistics()
        #expect(stats.channelsCurrent == 10_000 && stats.channelsCreated == 10_000 && stats.channelsRefused == 2)
        #expect(stats.byStatus[201] == 10_000)
        #expect(stats.byReason["CannotCreateChannelConfig"] == 2)
    }
}
