import APNsMock
import Foundation
import Testing
import TestSupport

/// Receipts and opens (`POST /api/user/notification-events`), on both stores: only
/// the user a delivery went to may report it, a repeat changes nothing, and the log,
/// its summary and /metrics show what was reported.
@Suite(.serverPostgres) struct NotificationEventTests {
    static func report(_ server: any APIServer, user: String, _ body: String) async -> HTTPResponse {
        await server.request("POST", "/api/user/notification-events", body: body, bearer: Harness.jwt(sub: user))
    }

    @Test(arguments: ServerStore.allCases)
    func receiptsAndOpensOfTheUsersOwnDeliveries(_ store: ServerStore) async throws {
        let t = Harness.tokens(2, seed: 240)
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-01-02T03:00:00Z")
        try await withClockedServer(store, production: production, clock: clock) { server in
            await BackendAPITests.register(server, user: "reader", token: t[0])
            await BackendAPITests.register(server, user: "other", token: t[1])
            let id = try await WorkerTests.notify(server, users: ["reader", "other"])
            try await server.drained()
            clock.set("2026-01-02T03:10:00Z")
            let before = await server.backend("GET", "/v1/notifications/\(id)")
            let delivery = try #require(await WorkerTests.deliveries(server, id)[t[0]])
            let apnsID = try #require(delivery["apns_id"] as? String)
            #expect(delivery["received_at"] == nil && delivery["opened_at"] == nil)

            // Another user's JWT: 404, and the log does not change.
            let refused = await Self.report(server, user: "other", #"{"apns_id":"\#(apnsID)","event":"received"}"#)
            #expect(refused.status == 404)
            #expect(refused.body == #"{"success":false,"error":"notification not found"}"#)
            let unknown = await Self.report(server, user: "reader",
                                            #"{"apns_id":"\#(UUID().uuidString)","event":"opened"}"#)
            #expect(unknown.status == 404)
            #expect(await server.backend("GET", "/v1/notifications/\(id)").body == before.body)

            // Bad input: 400, nothing stored.
            for (body, error) in [(#"{"event":"received"}"#, "apns_id is required"),
                                  (#"{"apns_id":"not-a-uuid","event":"received"}"#, "apns_id is required"),
                                  (#"{"apns_id":"\#(apnsID)","event":"clicked"}"#, #"event must be \"received\" or \"opened\""#),
                                  (#"{"apns_id":"\#(apnsID)","event":"opened","at":"yesterday"}"#, "at must be an ISO-8601 time")] {
                let r = await Self.report(server, user: "reader", body)
                #expect(r.status == 400 && r.body.contains(error), "\(body): \(r.body)")
            }
            #expect(await server.backend("GET", "/v1/notifications/\(id)").body == before.body)
            #expect(await server.request("POST", "/api/user/notification-events",
                                         body: #"{"apns_id":"\#(apnsID)","event":"received"}"#).status == 401)

            // The user's own: recorded, the first time kept on a repeat.
            let received = await Self.report(server, user: "reader",
                                             #"{"apns_id":"\#(apnsID.uppercased())","event":"received","at":"2026-01-02T03:04:05.678Z"}"#)
            #expect(received.status == 200, "\(received.body)")
            #expect(received.body == #"{"success":true,"apns_id":"\#(apnsID)","received_at":"2026-01-02T03:04:05.678Z","opened_at":null}"#)
            let again = await Self.report(server, user: "reader", #"{"apns_id":"\#(apnsID)","event":"received"}"#)
            #expect(again.body == received.body)
            let opened = await Self.report(server, user: "reader",
                                           #"{"apns_id":"\#(apnsID)","event":"opened","at":1767323100}"#)
            #expect(opened.body == #"{"success":true,"apns_id":"\#(apnsID)","received_at":"2026-01-02T03:04:05.678Z","opened_at":"2026-01-02T03:05:00.000Z"}"#)
            #expect(await Self.report(server, user: "reader", #"{"apns_id":"\#(apnsID)","event":"opened"}"#).body == opened.body)

            let log = await server.backend("GET", "/v1/notifications/\(id)").json
            let summary = try #require(log["summary"] as? [String: Int])
            #expect(summary == ["pending": 0, "delivered": 2, "failed": 0, "received": 1, "opened": 1])
            let reader = try #require(await WorkerTests.deliveries(server, id)[t[0]])
            #expect(reader["received_at"] as? String == "2026-01-02T03:04:05.678Z")
            #expect(reader["opened_at"] as? String == "2026-01-02T03:05:00.000Z")
            #expect(await WorkerTests.deliveries(server, id)[t[1]]?["received_at"] == nil)
            let one = await server.backend("GET", "/v1/deliveries?apns_id=\(apnsID)").json
            #expect(one["opened_at"] as? String == "2026-01-02T03:05:00.000Z")

            // Counted once each, however often reported.
            let metrics = await server.metrics().body
            #expect(metrics.contains(#"apns_server_notification_events_total{app="staff",type="order_status_changed",event="received"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"apns_server_notification_events_total{app="staff",type="order_status_changed",event="opened"} 1"#))
        }
    }

    /// A delivery APNs refused was reported received and opened (the summary read
    /// "failed 1, received 1, opened 1"), and `at` could be 1970: now a 409 that
    /// writes nothing, and a time before the send is read as the send.
    @Test(arguments: ServerStore.allCases)
    func onlyADeliveredNotificationTakesReportsAndNoneBeforeItsSend(_ store: ServerStore) async throws {
        let t = Harness.tokens(2, seed: 241)
        let production = try Harness.mock(sandbox: false) { $0.forced = [t[1]: .error(400, "DeviceTokenNotForTopic")] }
        defer { production.stop() }
        let clock = FakeClock(at: "2026-01-02T03:00:00Z")
        try await withClockedServer(store, production: production, clock: clock) { server in
            await BackendAPITests.register(server, user: "reader", token: t[0])
            await BackendAPITests.register(server, user: "failed", token: t[1])
            let id = try await WorkerTests.notify(server, users: ["reader", "failed"])
            try await server.drained()
            clock.set("2026-01-02T03:10:00Z")
            let deliveries = await WorkerTests.deliveries(server, id)
            let lost = try #require(deliveries[t[1]])
            #expect(lost["state"] as? String == "failed")
            let lostID = try #require(lost["apns_id"] as? String)
            let before = await server.backend("GET", "/v1/notifications/\(id)")

            for event in ["received", "opened"] {
                let r = await Self.report(server, user: "failed", #"{"apns_id":"\#(lostID)","event":"\#(event)"}"#)
                #expect(r.status == 409, "\(r.body)")
                #expect(r.body == #"{"success":false,"error":"the notification was not delivered (failed): it cannot have been \#(event)"}"#)
            }
            #expect(await server.backend("GET", "/v1/notifications/\(id)").body == before.body)
            let summary = await server.backend("GET", "/v1/notifications/\(id)").json["summary"] as? [String: Int]
            #expect(summary == ["pending": 0, "delivered": 1, "failed": 1])

            // 1970 (and anything before the send) is the send; the send is 03:00.
            let readerID = try #require(deliveries[t[0]]?["apns_id"] as? String)
            let early = await Self.report(server, user: "reader", #"{"apns_id":"\#(readerID)","event":"opened","at":0}"#)
            #expect(early.body == #"{"success":true,"apns_id":"\#(readerID)","received_at":"2026-01-02T03:00:00.000Z","opened_at":"2026-01-02T03:00:00.000Z"}"#)
        }
    }

    /// `at` is read by the API's one strict time reader: "+5:30", "+99:00",
    /// "2026-02-30" and years before 1970 are each a 400 that records nothing.
    @Test(arguments: ServerStore.allCases)
    func aReportsTimeIsReadStrictly(_ store: ServerStore) async throws {
        let t = Harness.tokens(1, seed: 242)
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-01-02T03:00:00Z")
        try await withClockedServer(store, production: production, clock: clock) { server in
            await BackendAPITests.register(server, user: "reader", token: t[0])
            let id = try await WorkerTests.notify(server, users: ["reader"])
            try await server.drained()
            clock.set("2026-01-02T05:00:00Z")
            let apnsID = try #require(await WorkerTests.deliveries(server, id)[t[0]]?["apns_id"] as? String)
            for bad in ["2026-01-02T09:00:00+5:30", "2026-01-02T04:00:00+99:00", "2026-02-30T04:00:00Z",
                        "1969-12-31T23:59:59Z", "2026-01-02T04:00:00"] {
                let r = await Self.report(server, user: "reader", #"{"apns_id":"\#(apnsID)","event":"opened","at":"\#(bad)"}"#)
                #expect(r.status == 400 && r.body.contains("at must be an ISO-8601 time"), "\(bad): \(r.body)")
            }
            #expect(await WorkerTests.deliveries(server, id)[t[0]]?["received_at"] == nil)
            let r = await Self.report(server, user: "reader", #"{"apns_id":"\#(apnsID)","event":"opened","at":"2026-01-02T09:30:00+05:30"}"#)
            #expect(r.body == #"{"success":true,"apns_id":"\#(apnsID)","received_at":"2026-01-02T04:00:00.000Z","opened_at":"2026-01-02T04:00:00.000Z"}"#)
        }
    }
}
