import APNsMock
import Foundation
import Store
import Testing
import TestSupport
@testable import Service
@testable import ServiceDelivery

/// A pending delivery says why it waits and until when (`waiting`), on both stores,
/// with a clock the test holds; scheduled notifications are listed soonest first
/// and keep the time they were asked for; a notification shows what it says.
@Suite(.serverPostgres) struct WaitingTests {
    /// 23:00 in Lisbon (WEST, UTC+1) on 1 June 2026.
    static let t0 = "2026-06-01T22:00:00Z"
    static let lisbon = #"{"quietHoursEnabled":true,"quietHoursStart":"22:00","quietHoursEnd":"07:00","timeZone":"Europe/Lisbon"}"#

    static func object(_ any: Any?) -> [String: Any] { any as? [String: Any] ?? [:] }

    static func withHeldServer(_ store: ServerStore, clock: FakeClock,
                               _ body: (InProcessServer, MockServer) async throws -> Void) async throws {
        let mock = try Harness.mock(sandbox: false)
        defer { mock.stop() }
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = Held.apps
        try await withClockedServer(store, production: mock, clock: clock, options: options) { server in
            try await body(server, mock)
        }
    }

    @Test(arguments: ServerStore.allCases) func quietHoursSayTheirLocalEnd(_ store: ServerStore) async throws {
        let clock = FakeClock(at: Self.t0)
        try await Self.withHeldServer(store, clock: clock) { server, _ in
            let token = Harness.tokens(1, seed: 5101)[0]
            await Held.user(server, "lisboeta", token: token, app: "travel", preferences: Self.lisbon)
            let sent = try await Held.notify(server, #""type":"message","app_type":"travel","user_ids":["lisboeta"],"entity_type":"trip","entity_id":"trip-1","entity_title":"Porto","alert":{"title":"Trip","body":"Bus at 8"}"#)

            let expected: [String: String] = ["reason": "quiet_hours", "until": "2026-06-02T06:00:00.000Z",
                                              "local_until": "07:00", "time_zone": "Europe/Lisbon"]
            // The notification's log, the delivery by apns-id and the user's list agree.
            let log = await server.backend("GET", "/v1/notifications/\(sent.id)")
            let first = Self.object((log.json["deliveries"] as? [[String: Any]])?.first)
            #expect(first["state"] as? String == "pending" && first["attempts"] as? Int == 0, "\(log.body)")
            #expect(first["waiting"] as? [String: String] == expected, "\(log.body)")
            #expect(log.body.contains(#""waiting":{"reason":"quiet_hours","until":"2026-06-02T06:00:00.000Z","local_until":"07:00","time_zone":"Europe/Lisbon"}"#))
            #expect(Self.object(log.json["content"]) as NSDictionary == ["title": "Trip", "body": "Bus at 8", "entity_type": "trip", "entity_title": "Porto"] as NSDictionary, "\(log.body)")
            let one = await server.backend("GET", "/v1/deliveries?apns_id=\(sent.apnsID)")
            #expect(one.json["waiting"] as? [String: String] == expected, "\(one.body)")
            let mine = await server.backend("GET", "/v1/users/lisboeta/deliveries")
            #expect(Self.object((mine.json["deliveries"] as? [[String: Any]])?.first)["waiting"] as? [String: String] == expected,
                    "\(mine.body)")

            // Past its end it is due; once sent, no longer waiting.
            clock.set("2026-06-02T06:00:01Z")
            try await Held.wait(server, sent.apnsID)
            let done = await server.backend("GET", "/v1/deliveries?apns_id=\(sent.apnsID)")
            #expect(done.json["waiting"] == nil && !done.body.contains("waiting"), "\(done.body)")
        }
    }

    @Test(arguments: ServerStore.allCases) func aBatchingWindowSaysWhenItCloses(_ store: ServerStore) async throws {
        let clock = FakeClock(at: "2026-06-01T10:00:00Z")
        try await Self.withHeldServer(store, clock: clock) { server, _ in
            let token = Harness.tokens(1, seed: 5102)[0]
            await Held.user(server, "tech", token: token, app: "field")
            let sent = try await Held.notify(server, #""type":"taskUpdate","app_type":"field","user_ids":["tech"],"entity_id":"job-1","alert":{"title":"Job","body":"b"}"#)
            let member = await Held.delivery(server, sent.apnsID)
            let carrier = try #require(member["carried_by"] as? String, "\(member)")
            #expect(member["state"] as? String == "batched" && member["waiting"] == nil, "\(member)")
            let window = await server.backend("GET", "/v1/deliveries?apns_id=\(carrier)")
            #expect(window.json["waiting"] as? [String: String] == ["reason": "batching", "until": "2026-06-01T10:01:00.000Z"],
                    "\(window.body)")
        }
    }

    @Test(arguments: ServerStore.allCases) func scheduledNotificationsAreListedSoonestFirst(_ store: ServerStore) async throws {
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        try await Self.withHeldServer(store, clock: clock) { server, mock in
            let token = Harness.tokens(1, seed: 5103)[0]
            await BackendAPITests.register(server, user: "s1", token: token)
            func schedule(_ at: String, _ title: String, app: String = "staff", type: String = "order_status_changed") async throws -> String {
                let r = await server.backend("POST", "/v1/notifications",
                                             #"{"type":"\#(type)","app_type":"\#(app)","user_ids":["s1"],"alert":{"title":"\#(title)","body":"b"},"send_at":"\#(at)"}"#)
                #expect(r.status == 202, "\(r.body)")
                return try #require(r.json["notification_id"] as? String)
            }
            let late = try await schedule("2026-06-01T15:00:00Z", "Third")
            let soon = try await schedule("2026-06-01T13:00:00Z", "First")
            let travel = try await schedule("2026-06-01T14:00:00Z", "Second", app: "travel", type: "message")

            let first = await server.backend("GET", "/v1/scheduled-notifications?limit=2")
            #expect(first.status == 200, "\(first.body)")
            let items = first.json["notifications"] as? [[String: Any]] ?? []
            #expect(items.map { $0["notification_id"] as? String } == [soon, travel], "\(first.body)")
            #expect(first.body.contains(#"{"notification_id":"\#(soon)","type":"order_status_changed","state":"scheduled","send_at":"2026-06-01T13:00:00.000Z","created_at":"2026-06-01T12:00:00.000Z","app_type":"staff","content":{"title":"First","body":"b","entity_type":null,"entity_title":null},"waiting":{"reason":"scheduled","until":"2026-06-01T13:00:00.000Z"}}"#),
                    "\(first.body)")
            let next = try #require(first.json["next"] as? String)
            let second = await server.backend("GET", "/v1/scheduled-notifications?limit=2&after=\(next)")
            #expect((second.json["notifications"] as? [[String: Any]])?.map { $0["notification_id"] as? String } == [late],
                    "\(second.body)")
            #expect(second.json["next"] == nil)
            let staffOnly = await server.backend("GET", "/v1/scheduled-notifications?app_type=staff")
            #expect((staffOnly.json["notifications"] as? [[String: Any]])?.map { $0["notification_id"] as? String } == [soon, late])

            // Bad input: one 400 each, nothing changed.
            for bad in ["app_type=nope", "after=x", "limit=0", "limit=501"] {
                let r = await server.backend("GET", "/v1/scheduled-notifications?\(bad)")
                #expect(r.status == 400 && r.json["error"] is String, "\(bad): \(r.body)")
            }

            // A cancelled one leaves the list.
            let cancelled = await server.backend("DELETE", "/v1/notifications/\(late)")
            #expect(cancelled.status == 200 && cancelled.json["state"] as? String == "cancelled", "\(cancelled.body)")
            let after = await server.backend("GET", "/v1/scheduled-notifications")
            #expect((after.json["notifications"] as? [[String: Any]])?.map { $0["notification_id"] as? String } == [soon, travel])

            // Sent at its time, it keeps the time it was asked for; the send time is its own.
            clock.set("2026-06-01T13:00:05Z")
            try await ScheduledSendTests.until("the first goes") { ScheduledSendTests.titles(mock, token) == ["First"] }
            let sent = await server.backend("GET", "/v1/notifications/\(soon)")
            #expect(sent.json["created_at"] as? String == "2026-06-01T12:00:00.000Z", "\(sent.body)")
            #expect(sent.json["send_at"] as? String == "2026-06-01T13:00:00.000Z", "\(sent.body)")
            let sentAt = try #require(sent.json["sent_at"] as? String, "\(sent.body)")
            #expect(sentAt.hasPrefix("2026-06-01T13:00:0"), "\(sent.body)")
            #expect(Self.object(sent.json["content"])["title"] as? String == "First", "\(sent.body)")
            let left = await server.backend("GET", "/v1/scheduled-notifications")
            #expect((left.json["notifications"] as? [[String: Any]])?.map { $0["notification_id"] as? String } == [travel])
        }
    }

    /// Unsaved preferences read as the defaults: `saved` tells an unknown id apart.
    @Test(arguments: ServerStore.allCases) func preferencesSayWhetherAnyWereSaved(_ store: ServerStore) async throws {
        try await withServer(store) { server in
            let unknown = await server.backend("GET", "/v1/users/nobody-at-all/push-preferences")
            #expect(unknown.status == 200 && unknown.json["saved"] as? Bool == false, "\(unknown.body)")
            let put = await server.request("PUT", "/api/user/push-preferences", body: #"{"orderStatusChanged":false}"#,
                                           bearer: Harness.jwt(sub: "chooser"))
            #expect(put.status == 200, "\(put.body)")
            let known = await server.backend("GET", "/v1/users/chooser/push-preferences")
            #expect(known.json["saved"] as? Bool == true, "\(known.body)")
        }
    }
}

/// The rule that names a wait, on the cases a server test cannot stage cheaply.
@Suite struct WaitingRuleTests {
    static let now: Int64 = 1_780_000_000_000

    static func view(attempts: Int = 0, notBefore: Int64? = nil, batched: Int? = nil) -> DeliveryView {
        DeliveryView(notificationID: "n", userID: "u", token: "t", environment: "production", state: "pending",
                     apnsID: "a", status: nil, reason: nil, timestamp: nil, attempts: attempts, finishedAt: nil,
                     notBefore: notBefore, batched: batched)
    }

    static func place(_ available: Int64?, lease: Int64? = nil) -> OutboxPlace {
        OutboxPlace(apnsID: "a", appType: "staff", availableAt: available, leaseUntil: lease)
    }

    @Test func eachReason() {
        let w = Waiting.of
        #expect(w(Self.view(), Self.place(Self.now - 1000), [:], Self.now)?.reason == .due)
        #expect(w(Self.view(), Self.place(Self.now - 61_000), [:], Self.now) == Waiting(reason: .late, at: Self.now - 61_000))
        #expect(w(Self.view(attempts: 2), Self.place(Self.now + 5000), [:], Self.now)
                == Waiting(reason: .retryBackoff, at: Self.now + 5000))
        #expect(w(Self.view(attempts: 1), Self.place(Self.now - 10, lease: Self.now + 30_000), [:], Self.now)?.reason == .sending)
        #expect(w(Self.view(batched: 1), Self.place(Self.now + 60_000), [:], Self.now)?.reason == .batching)
        // A deferred one whose user has since turned quiet hours off: still quiet hours, in their zone.
        let zoned = w(Self.view(notBefore: Self.now + 3_600_000), Self.place(Self.now + 3_600_000),
                      ["timeZone": .text("Asia/Tokyo")], Self.now)
        #expect(zoned?.reason == .quietHours && zoned?.timeZone == "Asia/Tokyo", "\(String(describing: zoned))")
        // Final, or out of the outbox: not waiting.
        var done = Self.view()
        done.state = "delivered"
        #expect(w(done, Self.place(nil), [:], Self.now) == nil)
        #expect(w(Self.view(), Self.place(nil), [:], Self.now) == nil)
    }

    /// A window's send held past its window by quiet hours says quiet hours.
    @Test func aWindowHeldByQuietHoursSaysQuietHours() throws {
        // 23:00 Lisbon; quiet until 07:00 (06:00 UTC).
        let now = Instants.millis("2026-06-01T22:00:00Z")
        let end = Instants.millis("2026-06-02T06:00:00Z")
        let prefs: [String: PreferenceValue] = ["quietHoursEnabled": .bool(true), "quietHoursStart": .text("22:00"),
                                                "quietHoursEnd": .text("07:00"), "timeZone": .text("Europe/Lisbon")]
        let held = Waiting.of(Self.view(notBefore: end, batched: 2), place: Self.place(end), preferences: prefs, now: now)
        #expect(held == Waiting(reason: .quietHours, at: end, localEnd: "07:00", timeZone: "Europe/Lisbon"))
    }
}
