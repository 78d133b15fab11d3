import APNsMock
import Foundation
import Testing
import TestSupport
@testable import Store

/// Whose tokens are whose, through the real server: an activity is its first
/// registrant's, device and Live Activity tokens stay apart, a token that changes
/// hands shows nothing of its old owner, a user's tokens are capped, long-inactive
/// ones are pruned, and a bulk registration is stored whole or not at all (SQLite
/// here, PostgreSQL in `bulkRegistrationIsOneTransactionOnPostgres`).
@Suite struct OwnershipServerTests {
    static func liveActivity(_ server: any APIServer, user: String, token: String, activity: String?) async -> HTTPResponse {
        let field = activity.map { #","activityId":"\#($0)""# } ?? ""
        return await server.request("POST", "/api/user/live-activity-token",
                                    body: #"{"pushToken":"\#(token)","appType":"staff","attributesType":"A"\#(field)}"#,
                                    bearer: Harness.jwt(sub: user))
    }

    static func device(_ server: any APIServer, user: String, token: String, details: String = "") async -> HTTPResponse {
        await server.request("POST", "/api/user/device-token",
                             body: #"{"deviceToken":"\#(token)","platform":"ios","appType":"staff"\#(details)}"#,
                             bearer: Harness.jwt(sub: user))
    }

    static func count(_ server: any APIServer, _ sql: String) async throws -> Int64? {
        try await server.store().scalar(sql)
    }

    @Test func anActivityIsItsFirstRegistrantsAndItsSendsReachOnlyThem() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(3, seed: 301)
        #expect(await Self.liveActivity(server, user: "alice", token: t[0], activity: "act-1").status == 200)

        let taken = #"{"success":false,"error":"activityId is registered to another user"}"#
        let bob = await Self.liveActivity(server, user: "bob", token: t[1], activity: "act-1")
        #expect(bob.status == 409 && bob.body == taken)
        let forBob = await server.backend("POST", "/v1/users/bob/live-activity-tokens",
                                          #"{"pushToken":"\#(t[2])","appType":"staff","attributesType":"A","activityId":"act-1"}"#)
        #expect(forBob.status == 409 && forBob.body == taken)
        #expect(await LiveActivityServerTests.tokens(server, "bob").isEmpty)

        let sent = try await LiveActivityServerTests.send(server,
            #"{"app_type":"staff","event":"update","activity_id":"act-1","content_state":{"gate":"B"}}"#)
        #expect(sent.body.contains(#""deliveries":1"#), "\(sent.body)")
        let deliveries = await LiveActivityServerTests.deliveries(server, sent.id)
        #expect(deliveries.map { $0["user_id"] as? String } == ["alice"])
    }

    @Test func deviceAndLiveActivityTokensNeverTurnIntoEachOther() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(2, seed: 302)
        #expect(await Self.device(server, user: "ana", token: t[0]).status == 200)
        #expect(await Self.liveActivity(server, user: "ana", token: t[1], activity: nil).status == 200)

        for user in ["ana", "bo"] {
            let asActivity = await Self.liveActivity(server, user: user, token: t[0], activity: "act-9")
            #expect(asActivity.status == 409)
            #expect(asActivity.body == #"{"success":false,"error":"pushToken is registered as a device token"}"#)
            let asDevice = await Self.device(server, user: user, token: t[1])
            #expect(asDevice.status == 409)
            #expect(asDevice.body == #"{"success":false,"error":"deviceToken is registered as a Live Activity token"}"#)
        }
        let devices = await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: "ana"))
        #expect((devices.json["tokens"] as? [[String: Any]])?.count == 1)
        #expect(await LiveActivityServerTests.tokens(server, "ana").map { $0["kind"] as? String } == ["start"])
        #expect(try await Self.count(server, "SELECT count(*) FROM devices WHERE platform = 'liveactivity'") == 1)
    }

    @Test func aTokenThatChangesHandsShowsNothingOfItsOldOwner() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let token = Harness.tokens(1, seed: 303)[0]
        let details = #","deviceName":"Alice's iPhone","osVersion":"17.4","appVersion":"1.0.0""#
        #expect(await Self.device(server, user: "alice", token: token, details: details).status == 200)
        #expect(await Self.device(server, user: "bob", token: token).status == 200)

        let bob = await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: "bob"))
        let row = try #require((bob.json["tokens"] as? [[String: Any]])?.first)
        #expect(row["device_name"] is NSNull && row["os_version"] is NSNull && row["app_version"] is NSNull, "\(bob.body)")
        #expect(!bob.body.contains("Alice"))
        let alice = await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: "alice"))
        #expect(alice.body == #"{"success":true,"tokens":[]}"#)
    }

    /// `max_tokens_per_user: 3`: a fourth registration deactivates the oldest, and a
    /// notification reaches three devices, not every token ever registered.
    @Test func aUsersActiveTokensAreCappedAndTheOldestGo() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "max_tokens_per_user: 3"
        let server = InProcessServer(sandbox: nil, production: nil, options: options)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(5, seed: 304)
        for token in t { await BackendAPITests.register(server, user: "many", token: token) }

        let list = await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: "many"))
        #expect((list.json["tokens"] as? [[String: Any]])?.count == 3)
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"order_created","app_type":"staff","user_ids":["many"],"alert":{"title":"t","body":"b"}}"#)
        #expect(r.status == 202 && r.json["deliveries"] as? Int == 3, "\(r.body)")
        #expect(try await Self.count(server, """
            SELECT count(*) FROM devices WHERE NOT is_active AND deactivated_reason = 'replaced'
              AND token IN ('\(t[0])', '\(t[1])')
            """) == 2)
    }

    /// `retention.inactive_device_days: 1`: a token logged out two days ago is gone
    /// after the pruner's first pass; an active one and a recent logout stay.
    @Test func theServerPrunesTokensDeactivatedLongAgo() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "retention:\n  inactive_device_days: 1"
        let server = InProcessServer(sandbox: nil, production: nil, options: options)
        let store = try server.store()
        try await store.migrate()
        let now = Int64(Date().timeIntervalSince1970 * 1000), day: Int64 = 86_400_000
        let t = Harness.tokens(3, seed: 305)
        for (i, token) in t.enumerated() {
            try await store.register(DeviceRegistration(userID: "p\(i)", token: token, platform: "ios", appType: "staff"),
                                     now: now - 3 * day)
        }
        #expect(try await store.unregister(userID: "p0", token: t[0], now: now - 2 * day))
        #expect(try await store.unregister(userID: "p1", token: t[1], now: now - day / 2))
        try await server.start()
        defer { Task { await server.stop() } }

        let end = Date().addingTimeInterval(60)
        while try await Self.count(server, "SELECT count(*) FROM devices WHERE token = '\(t[0])'") != 0 {
            try #require(Date() < end, "the old logout was never pruned")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await Self.count(server, "SELECT count(*) FROM devices") == 2)
    }

    static func bulk(_ tokens: [String], from: Int = 0) -> String {
        let entries = tokens.enumerated().map { i, token in
            #"{"user_id":"bulk-user-\#(from + i)","company_id":"company-0001","deviceToken":"\#(token)","platform":"ios","appType":"staff","deviceName":"iPhone 15 Pro Max","osVersion":"17.4.1","appVersion":"2.10.3","environment":"production"}"#
        }
        return #"{"devices":[\#(entries.joined(separator: ","))]}"#
    }

    /// The route's 1,000 entries fit its body limit with the server's default
    /// `max_body_bytes` (64 KiB): a thousand ordinary entries are over 200 KB.
    @Test func aBulkRegistrationOfTheMaximumCountFitsItsBodyLimit() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let tokens = Harness.tokens(1001, seed: 306)
        let body = Self.bulk(Array(tokens.prefix(1000)))
        #expect(body.utf8.count > 200_000)
        let r = await server.backend("POST", "/v1/device-tokens", body)
        #expect(r.status == 200 && r.body == #"{"success":true,"registered":1000}"#, "\(r.status) \(r.body.prefix(200))")
        let over = await server.backend("POST", "/v1/device-tokens", Self.bulk(tokens))
        #expect(over.status == 400)
        #expect(over.body == #"{"success":false,"error":"devices must be a list of at most 1000 registrations"}"#)
        // Other routes keep the server's limit.
        let big = await server.backend("POST", "/v1/notifications", String(repeating: " ", count: 70_000) + "{}")
        #expect(big.status == 413)
    }

    /// The store fails on the 501st of 1,000 entries (a trigger stands in for a full
    /// disk): a 500 that says none was stored, and none was.
    @Test func aBulkRegistrationThatFailsPartwayStoresNothing() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let tokens = Harness.tokens(1000, seed: 307)
        for sql in DiskFullTrigger.create(.sqlite, table: "devices", column: "token", value: tokens[500]) {
            try await server.store().execute(sql)
        }
        let r = await server.backend("POST", "/v1/device-tokens", Self.bulk(tokens))
        #expect(r.status == 500)
        #expect(r.body == #"{"success":false,"error":"the devices could not be stored: the list is stored whole or not at all, so send it again whole"}"#)
        #expect(try await Self.count(server, "SELECT count(*) FROM devices") == 0)

        // A Live Activity token among them: 409 naming the entry, nothing stored either.
        try await server.store().execute(DiskFullTrigger.drop(.sqlite, table: "devices"))
        #expect(await Self.liveActivity(server, user: "la", token: tokens[700], activity: nil).status == 200)
        let refused = await server.backend("POST", "/v1/device-tokens", Self.bulk(tokens))
        #expect(refused.status == 409)
        #expect(refused.body == #"{"success":false,"error":"devices[700]: deviceToken is registered as a Live Activity token"}"#)
        #expect(try await Self.count(server, "SELECT count(*) FROM devices") == 1)
    }
}

/// The bulk route on PostgreSQL: the same failure partway, the same nothing stored.
@Suite struct OwnershipPostgresServerTests {
    @Test func bulkRegistrationIsOneTransactionOnPostgres() async throws {
        try await ScaleOut.run(instances: 1) { scale in
            let server = scale.servers[0]
            let tokens = Harness.tokens(1000, seed: 308)
            for sql in DiskFullTrigger.create(.postgres, table: "devices", column: "token", value: tokens[500]) {
                try await scale.store.execute(sql)
            }
            let r = await server.backend("POST", "/v1/device-tokens", OwnershipServerTests.bulk(tokens))
            #expect(r.status == 500)
            #expect(r.body == #"{"success":false,"error":"the devices could not be stored: the list is stored whole or not at all, so send it again whole"}"#)
            #expect(try await scale.store.scalar("SELECT count(*) FROM devices") == 0)

            try await scale.store.execute(DiskFullTrigger.drop(.postgres, table: "devices"))
            let ok = await server.backend("POST", "/v1/device-tokens", OwnershipServerTests.bulk(tokens))
            #expect(ok.body == #"{"success":true,"registered":1000}"#)
            #expect(try await scale.store.scalar("SELECT count(*) FROM devices") == 1000)
        }
    }
}
