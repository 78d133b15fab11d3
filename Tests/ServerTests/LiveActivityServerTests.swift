import APNsMock
import Foundation
import Testing
import TestSupport

/// Live Activities in apns-server (issue #12): the app registers update and
/// push-to-start tokens (only its own), the backend sends start, update and end
/// through the same outbox as notifications, with the headers APNS-PROTOCOL.md's
/// "Live Activities" section gives, and the log shows each delivery.
@Suite struct LiveActivityServerTests {
    static let attributes = "DeliveryAttributes"

    static func registerToken(_ server: any APIServer, user: String, token: String, activity: String? = nil,
                              app: String = "staff") async {
        let activityField = activity.map { #","activityId":"\#($0)""# } ?? ""
        let r = await server.request("POST", "/api/user/live-activity-token",
                                     body: #"{"pushToken":"\#(token)","appType":"\#(app)","attributesType":"\#(attributes)"\#(activityField)}"#,
                                     bearer: Harness.jwt(sub: user))
        #expect(r.status == 200, "\(r.body)")
        #expect(r.body == #"{"success":true,"message":"Live Activity token registered successfully"}"#)
    }

    static func tokens(_ server: any APIServer, _ user: String) async -> [[String: Any]] {
        let r = await server.request("GET", "/api/user/live-activity-tokens", bearer: Harness.jwt(sub: user))
        #expect(r.status == 200)
        return r.json["tokens"] as? [[String: Any]] ?? []
    }

    static func send(_ server: any APIServer, _ body: String) async throws -> (id: String, body: String) {
        let r = await server.backend("POST", "/v1/live-activities", body)
        #expect(r.status == 202, "\(r.body)")
        return (try #require(r.json["notification_id"] as? String), r.body)
    }

    static func deliveries(_ server: any APIServer, _ id: String) async -> [[String: Any]] {
        await server.backend("GET", "/v1/notifications/\(id)").json["deliveries"] as? [[String: Any]] ?? []
    }

    /// Register, list, unregister: exact JSON, only the user's own tokens, never
    /// among the device tokens; every auth failure and bad body.
    @Test func appTokensAreTheUsersOwn() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(3, seed: 61)
        await Self.registerToken(server, user: "ana", token: t[0], activity: "act-1")
        await Self.registerToken(server, user: "ana", token: t[1])

        let list = await server.request("GET", "/api/user/live-activity-tokens", bearer: Harness.jwt(sub: "ana"))
        #expect(list.status == 200)
        let rows = try #require(list.json["tokens"] as? [[String: Any]])
        #expect(rows.count == 2)
        #expect(rows.map { $0["kind"] as? String } == ["start", "update"], "newest first")
        #expect(rows[1]["activity_id"] as? String == "act-1" && rows[0]["activity_id"] is NSNull)
        #expect(rows.allSatisfy { $0["app_type"] as? String == "staff" && $0["attributes_type"] as? String == Self.attributes
                && $0["environment"] as? String == "production" && $0["last_used_at"] is NSNull })
        let id = try #require(rows[1]["id"] as? Int)
        let created = try #require(rows[1]["created_at"] as? String)
        #expect(list.body.contains(#"{"id":\#(id),"kind":"update","app_type":"staff","attributes_type":"DeliveryAttributes","activity_id":"act-1","environment":"production","last_used_at":null,"created_at":"\#(created)"}"#))

        // Not device tokens, and not another user's.
        let devices = await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: "ana"))
        #expect(devices.body == #"{"success":true,"tokens":[]}"#)
        let other = await server.request("GET", "/api/user/live-activity-tokens", bearer: Harness.jwt(sub: "bo"))
        #expect(other.body == #"{"success":true,"tokens":[]}"#)
        let asDevice = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(t[0])"}"#,
                                            bearer: Harness.jwt(sub: "ana"))
        #expect(asDevice.status == 404, "a Live Activity token is not a device token")
        let steal = await server.request("DELETE", "/api/user/live-activity-token", body: #"{"pushToken":"\#(t[0])"}"#,
                                         bearer: Harness.jwt(sub: "bo"))
        #expect(steal.status == 404)
        #expect(steal.body == #"{"success":false,"error":"Live Activity token not found"}"#)
        let gone = await server.request("DELETE", "/api/user/live-activity-token", body: #"{"pushToken":"\#(t[0].uppercased())"}"#,
                                        bearer: Harness.jwt(sub: "ana"))
        #expect(gone.status == 200)
        #expect(gone.body == #"{"success":true,"message":"Live Activity token unregistered successfully"}"#)
        #expect(await Self.tokens(server, "ana").map { $0["kind"] as? String } == ["start"])

        // Auth.
        let noAuth = await server.request("GET", "/api/user/live-activity-tokens")
        #expect(noAuth.status == 401 && noAuth.body == #"{"success":false,"error":"missing bearer token"}"#)
        let forged = await server.request("POST", "/api/user/live-activity-token", body: "{}",
                                          bearer: Harness.jwt(sub: "ana", secret: "not-the-secret-0123456789"))
        #expect(forged.status == 401 && forged.body == #"{"success":false,"error":"invalid token"}"#)
        let expired = await server.request("GET", "/api/user/live-activity-tokens",
                                           bearer: Harness.jwt(sub: "ana", exp: Int(Date().timeIntervalSince1970) - 10))
        #expect(expired.status == 401 && expired.body == #"{"success":false,"error":"token expired"}"#)
        let userOnBackend = await server.request("POST", "/v1/live-activities", body: "{}", bearer: Harness.jwt(sub: "ana"))
        #expect(userOnBackend.status == 401 && userOnBackend.body == #"{"success":false,"error":"invalid API key"}"#)
        let keyless = await server.request("POST", "/v1/users/ana/live-activity-tokens", body: "{}")
        #expect(keyless.status == 401 && keyless.body == #"{"success":false,"error":"missing API key"}"#)

        // Bad bodies: one clear 400 each, nothing stored.
        let bad: [(String, String)] = [
            (#"{"appType":"staff","attributesType":"A"}"#, "pushToken is required"),
            (#"{"pushToken":"abc","appType":"staff","attributesType":"A"}"#, "pushToken must be 64 to 200 hex digits (an even count)"),
            (#"{"pushToken":"\#(t[2])","appType":"nope","attributesType":"A"}"#, "unknown appType; configured: staff, customer"),
            (#"{"pushToken":"\#(t[2])","appType":"staff"}"#, "attributesType is required (the ActivityAttributes type name)"),
            (#"{"pushToken":"\#(t[2])","appType":"staff","attributesType":"A","activityId":7}"#, "activityId must be a string of 1 to 256 characters"),
            (#"{"pushToken":"\#(t[2])","appType":"staff","attributesType":"A","environment":"dev"}"#, #"environment must be \"sandbox\" or \"production\""#),
        ]
        for (body, message) in bad {
            let r = await server.request("POST", "/api/user/live-activity-token", body: body, bearer: Harness.jwt(sub: "cy"))
            #expect(r.status == 400, "\(body)")
            #expect(r.body == #"{"success":false,"error":"\#(message)"}"#)
        }
        #expect(await Self.tokens(server, "cy").isEmpty)

        // The backend registers for a user too.
        let forUser = await server.backend("POST", "/v1/users/cy/live-activity-tokens",
                                           #"{"pushToken":"\#(t[2])","appType":"customer","attributesType":"A","environment":"sandbox"}"#)
        #expect(forUser.status == 200 && forUser.body == #"{"success":true,"message":"Live Activity token registered successfully"}"#)
        let cy = await Self.tokens(server, "cy")
        #expect(cy.count == 1 && cy[0]["environment"] as? String == "sandbox" && cy[0]["app_type"] as? String == "customer")
    }

    /// Start to a push-to-start token, update and end to the activity's token, each
    /// through the outbox with push type liveactivity, the `.push-type.liveactivity`
    /// topic and Apple's priorities; the end retires the update token.
    @Test func startUpdateEndThroughTheOutbox() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(2, seed: 62)
        let start = t[0], update = t[1]
        await Self.registerToken(server, user: "ana", token: start)
        await Self.registerToken(server, user: "ana", token: update, activity: "act-9")
        let topic = Harness.pki.topic + ".push-type.liveactivity"

        // start: the push-to-start token only; "bo" has none.
        let s = try await Self.send(server, #"{"app_type":"staff","event":"start","user_ids":["ana","bo"],"attributes_type":"DeliveryAttributes","attributes":{"order":"o-1"},"content_state":{"stop":3},"timestamp":1790000000,"alert":{"title":"Out for delivery","body":"Your order is on its way"}}"#)
        #expect(s.body == #"{"notification_id":"\#(s.id)","deliveries":1,"skipped":{"no_tokens":1}}"#)
        try await server.drained()
        let sent = production.recordedRequests()
        #expect(sent.count == 1)
        let first = try #require(sent.first)
        #expect(first.token == start)
        #expect(first.header("apns-topic") == topic)
        #expect(first.header("apns-push-type") == "liveactivity")
        #expect(first.header("apns-priority") == "10")
        #expect(String(decoding: first.body, as: UTF8.self) == #"{"aps":{"alert":{"title":"Out for delivery","body":"Your order is on its way"},"timestamp":1790000000,"event":"start","content-state":{"stop":3},"attributes-type":"DeliveryAttributes","attributes":{"order":"o-1"}}}"#)
        let logged = await Self.deliveries(server, s.id)
        #expect(logged.count == 1 && logged[0]["state"] as? String == "delivered" && logged[0]["token"] as? String == start)
        #expect(logged[0]["apns_id"] as? String == first.header("apns-id"))

        // update without an alert: priority 5 (outside the budget); to the activity's token.
        let u = try await Self.send(server, #"{"app_type":"staff","event":"update","activity_id":"act-9","content_state":{"stop":2},"timestamp":1790000100,"stale_date":1790003600,"relevance_score":50}"#)
        #expect(u.body == #"{"notification_id":"\#(u.id)","deliveries":1}"#)
        try await server.drained()
        let second = try #require(production.recordedRequests().last)
        #expect(second.token == update && second.header("apns-priority") == "5" && second.header("apns-topic") == topic)
        #expect(String(decoding: second.body, as: UTF8.self) == #"{"aps":{"timestamp":1790000100,"event":"update","content-state":{"stop":2},"stale-date":1790003600,"relevance-score":50.0}}"#)
        let uLog = await server.backend("GET", "/v1/notifications/\(u.id)")
        #expect(uLog.body.contains(#""type":"live_activity.update","entity_id":"act-9""#))
        #expect(uLog.body.contains(#""summary":{"pending":0,"delivered":1,"failed":0}"#))

        // end: priority 10, then the update token is retired.
        let before = Int(Date().timeIntervalSince1970)
        let e = try await Self.send(server, #"{"app_type":"staff","event":"end","user_ids":["ana"],"content_state":{"stop":0},"dismissal_date":1790007200}"#)
        #expect(e.body == #"{"notification_id":"\#(e.id)","deliveries":1,"skipped":{"no_tokens":0}}"#)
        try await server.drained()
        let third = try #require(production.recordedRequests().last)
        #expect(third.token == update && third.header("apns-priority") == "10")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(third.body)) as? [String: Any])
        let aps = try #require(body["aps"] as? [String: Any])
        #expect(aps["event"] as? String == "end" && aps["dismissal-date"] as? Int == 1_790_007_200)
        let stamp = try #require(aps["timestamp"] as? Int)
        #expect(stamp >= before && stamp <= Int(Date().timeIntervalSince1970), "timestamp defaults to now")
        #expect(await Self.tokens(server, "ana").map { $0["kind"] as? String } == ["start"], "the ended activity's token is retired")
        let after = try await Self.send(server, #"{"app_type":"staff","event":"update","activity_id":"act-9","content_state":{"stop":1}}"#)
        #expect(after.body == #"{"notification_id":"\#(after.id)","deliveries":0}"#)
        try await server.drained()
        #expect(production.recordedRequests().count == 3)
    }

    /// Each bad send is a 400 with the library's reason, and nothing is stored or sent.
    @Test func badSendsAreRefusedWhole() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        await Self.registerToken(server, user: "ana", token: Harness.tokens(1, seed: 63)[0], activity: "a1")
        let cases: [(String, String)] = [
            (#"{"event":"update","activity_id":"a1","content_state":{}}"#, "app_type is required"),
            (#"{"app_type":"staff","activity_id":"a1"}"#, "event is required (start, update or end)"),
            (#"{"app_type":"staff","event":"pause","activity_id":"a1"}"#, "event must be start, update or end, not 'pause'"),
            (#"{"app_type":"staff","event":"update","content_state":{}}"#, "an update needs activity_id or user_ids"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","user_ids":["ana"],"content_state":{}}"#, "give user_ids or activity_id, not both"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1"}"#, "a Live Activity update needs aps.content-state"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{},"attributes":{"x":1}}"#, "aps.attributes belongs to a Live Activity start only"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{},"dismissal_date":5}"#, "aps.dismissal-date belongs to a Live Activity end only"),
            (#"{"app_type":"staff","event":"start","user_ids":["ana"],"attributes_type":"A","content_state":{},"alert":"hi"}"#, "a Live Activity start needs aps.attributes"),
            (#"{"app_type":"staff","event":"start","user_ids":["ana"],"attributes_type":"A","attributes":{},"content_state":{}}"#, "a Live Activity start needs aps.alert"),
            (#"{"app_type":"staff","event":"start","activity_id":"a1"}"#, "a start goes to push-to-start tokens: give user_ids, not activity_id"),
            (#"{"app_type":"staff","event":"start","user_ids":["ana"]}"#, "a start needs attributes_type"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","content_state":[1]}"#, "content_state must be a JSON object"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{},"priority":1}"#, "priority must be 10 or 5 for a Live Activity"),
            (#"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{},"timestamp":"now"}"#, "timestamp must be a UNIX time in seconds"),
        ]
        for (body, message) in cases {
            let r = await server.backend("POST", "/v1/live-activities", body)
            #expect(r.status == 400, "\(body): \(r.body)")
            #expect(r.body == #"{"success":false,"error":"\#(message)"}"#)
        }
        let big = String(repeating: "x", count: 4200)
        let tooBig = await server.backend("POST", "/v1/live-activities",
                                          #"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{"x":"\#(big)"}}"#)
        #expect(tooBig.status == 400 && tooBig.body.contains("APNs accepts at most 4096 for liveactivity pushes"))
        let metrics = await server.metrics().body
        #expect(metrics.contains("apns_server_outbox_depth 0"))
        #expect(production.recordedRequests().isEmpty)
    }

    /// A 410 for an update token deactivates it, as for device tokens.
    @Test func unregisteredTokenIsDeactivated() async throws {
        let t = Harness.tokens(1, seed: 64)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let production = try Harness.mock(sandbox: false) { $0.unregistered = [t[0]: now + 3_600_000] }
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        await Self.registerToken(server, user: "ana", token: t[0], activity: "gone")
        let s = try await Self.send(server, #"{"app_type":"staff","event":"update","activity_id":"gone","content_state":{"n":1}}"#)
        try await server.drained()
        let d = try #require(await Self.deliveries(server, s.id).first)
        #expect(d["state"] as? String == "failed" && d["status"] as? Int == 410 && d["reason"] as? String == "Unregistered")
        #expect(await Self.tokens(server, "ana").isEmpty)
    }
}

/// kill -9 with a Live Activity delivery pending in the outbox: after the restart
/// it is sent once, with its apns-id, and logged once.
@Suite(.serialized) struct LiveActivityDurabilityTests {
    @Test func pendingLiveActivitySurvivesKillNine() async throws {
        let token = Harness.tokens(1, seed: 65)[0]
        // APNs away at first: each request taken and its connection reset, never
        // answered, so the delivery stays pending, released with backoff. The port
        // stays this test's until the real mock takes it (a port left free could be
        // taken by another test's mock, which would answer).
        let away = try Harness.mock(sandbox: false) { $0.resetAfter = 1 }
        let port = away.port
        var options = ServerProcess.Options()
        options.backoffBaseMillis = 100
        options.leaseSeconds = 2
        let server = ServerProcess(sandbox: nil, production: away, options: options)
        try await server.start()
        await LiveActivityServerTests.registerToken(server, user: "ana", token: token, activity: "crash")
        let s = try await LiveActivityServerTests.send(server, #"{"app_type":"staff","event":"update","activity_id":"crash","content_state":{"n":1}}"#)
        let end = Date().addingTimeInterval(300)    // a hang guard: a loaded machine runs the worker late
        var attempts = 0
        while Date() < end {
            attempts = await LiveActivityServerTests.deliveries(server, s.id).first?["attempts"] as? Int ?? 0
            if attempts >= 1 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(attempts >= 1, "tried while APNs was away")
        #expect(await server.stop(SIGKILL) == SIGKILL)
        #expect(try await server.store().outboxDepth() == 1, "still pending after the crash")

        away.stop()
        let production = try Harness.mock(sandbox: false) { $0.port = port }
        defer { production.stop() }
        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 60)
        let logged = await LiveActivityServerTests.deliveries(server, s.id)
        #expect(logged.count == 1 && logged[0]["state"] as? String == "delivered")
        let sent = production.recordedRequests()
        #expect(sent.count == 1, "sent once")
        #expect(sent.first?.header("apns-id") == logged[0]["apns_id"] as? String)
        #expect(sent.first?.header("apns-push-type") == "liveactivity")
    }
}
