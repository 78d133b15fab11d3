import APNsMock
import Foundation
import Testing
import TestSupport
@testable import Service

/// `send_at`, `schedule_key` and `DELETE /v1/notifications/{id}`, in process on
/// both stores with a clock the test holds: a scheduled notification waits for its
/// time, then goes as if posted then (preferences of send time); a cancelled one
/// never goes; a replaced one goes only in its new form; bad times store nothing.
@Suite(.serverPostgres) struct ScheduledSendTests {
    static let t0 = "2026-06-01T12:00:00Z"

    static func body(_ users: [String], _ title: String, type: String = "order_status_changed", extra: String = "") -> String {
        let ids = users.map { "\"\($0)\"" }.joined(separator: ",")
        return #"{"type":"\#(type)","app_type":"staff","user_ids":[\#(ids)],"alert":{"title":"\#(title)","body":"b"}\#(extra)}"#
    }

    /// What `mock` received for `token`: the alerts' titles, in order.
    static func titles(_ mock: MockServer, _ token: String) -> [String] {
        mock.recordedRequests().filter { $0.token == token }.compactMap { request in
            let json = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
            return ((json?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String
        }
    }

    /// Until `done` (a hang guard only: the event is what the test waits for).
    static func until(_ what: String, _ done: () async -> Bool) async throws {
        let end = Date().addingTimeInterval(120)
        while Date() < end {
            if await done() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("never happened: \(what)")
    }

    @Test(arguments: ServerStore.allCases) func aScheduledNotificationWaitsAndFollowsSendTimePreferences(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let t = Harness.tokens(2, seed: 2311)
            await BackendAPITests.register(server, user: "stays", token: t[0])
            await BackendAPITests.register(server, user: "optsOut", token: t[1])

            let posted = await server.backend("POST", "/v1/notifications",
                                              Self.body(["stays", "optsOut"], "Reminder", extra: #","send_at":"2026-06-01T13:00:00Z""#))
            #expect(posted.status == 202, "\(posted)")
            let id = try #require(posted.json["notification_id"] as? String)
            #expect(posted.body == #"{"notification_id":"\#(id)","state":"scheduled","send_at":"2026-06-01T13:00:00.000Z"}"#)
            let waiting = await server.backend("GET", "/v1/notifications/\(id)")
            #expect(waiting.json["state"] as? String == "scheduled", "\(waiting)")

            // Before its time, the user turns the type off: decided at send time.
            let off = await server.request("PUT", "/api/user/push-preferences", body: #"{"orderStatusChanged":false}"#,
                                           bearer: Harness.jwt(sub: "optsOut"))
            #expect(off.status == 200)
            // A probe sent now goes at once; the scheduled one has not.
            let probe = await server.backend("POST", "/v1/notifications", Self.body(["stays"], "Probe"))
            #expect(probe.status == 202)
            try await Self.until("the probe is sent") { Self.titles(production, t[0]) == ["Probe"] }
            // Its result recorded before time moves: a lease read against a clock an hour
            // ahead has expired, and the probe would be claimed and sent again.
            try await server.drained()
            clock.set("2026-06-01T12:59:59Z")
            let probe2 = await server.backend("POST", "/v1/notifications", Self.body(["stays"], "Probe 2"))
            #expect(probe2.status == 202)
            try await Self.until("the second probe is sent") { Self.titles(production, t[0]).count == 2 }
            #expect(Self.titles(production, t[0]) == ["Probe", "Probe 2"], "not a millisecond early")
            try await server.drained()

            clock.set("2026-06-01T13:00:00Z")
            try await Self.until("the reminder is sent") { Self.titles(production, t[0]).count == 3 }
            try await server.drained()
            #expect(Self.titles(production, t[0]) == ["Probe", "Probe 2", "Reminder"])
            #expect(production.attempts(for: t[1]) == 0, "turned off before the reminder's time")
            let sent = await server.backend("GET", "/v1/notifications/\(id)")
            #expect((sent.json["summary"] as? [String: Any])?["delivered"] as? Int == 1, "\(sent)")
        }
    }

    @Test(arguments: ServerStore.allCases) func cancelledNeverGoesAndReplacedGoesInItsNewForm(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let token = Harness.tokens(1, seed: 2312)[0]
            await BackendAPITests.register(server, user: "m", token: token)
            let at = #","send_at":1780318800"#   // 2026-06-01T13:00:00Z in UNIX seconds
            let keyed = #","schedule_key":"trip-9/event-4/reminder""#

            let cancelled = await server.backend("POST", "/v1/notifications", Self.body(["m"], "Cancelled", extra: at))
            let cancelledID = try #require(cancelled.json["notification_id"] as? String, "\(cancelled)")
            let old = await server.backend("POST", "/v1/notifications", Self.body(["m"], "Old time", extra: at + keyed))
            let oldID = try #require(old.json["notification_id"] as? String, "\(old)")
            let new = await server.backend("POST", "/v1/notifications", Self.body(["m"], "New time", extra: at + keyed))
            #expect(new.status == 202 && new.json["superseded"] as? String == oldID, "\(new)")
            let newID = try #require(new.json["notification_id"] as? String)

            let deleted = await server.backend("DELETE", "/v1/notifications/\(cancelledID)")
            #expect(deleted.status == 200 && deleted.json["state"] as? String == "cancelled", "\(deleted)")
            #expect(await server.backend("DELETE", "/v1/notifications/\(cancelledID)").status == 200, "cancelling again is a no-op")
            let replaced = await server.backend("GET", "/v1/notifications/\(oldID)")
            #expect(replaced.json["state"] as? String == "superseded" && replaced.json["superseded_by"] as? String == newID)
            #expect(await server.backend("DELETE", "/v1/notifications/\(oldID)").status == 409)
            #expect(await server.backend("DELETE", "/v1/notifications/no-such-id").status == 404)

            clock.set("2026-06-01T13:00:00Z")
            try await Self.until("the new form is sent") { Self.titles(production, token) == ["New time"] }
            // A notification posted after it goes after it: by then the others would have too.
            let probe = await server.backend("POST", "/v1/notifications", Self.body(["m"], "Probe"))
            #expect(probe.status == 202)
            try await Self.until("the probe is sent") { Self.titles(production, token).count == 2 }
            try await server.drained()
            #expect(Self.titles(production, token) == ["New time", "Probe"])
            #expect(await server.backend("GET", "/v1/notifications/\(cancelledID)").json["state"] as? String == "cancelled")
            let late = await server.backend("DELETE", "/v1/notifications/\(newID)")
            #expect(late.status == 200 && late.json["cancelled"] as? Int == 0 && late.json["already_sent"] as? Int == 1,
                    "sent: nothing left to cancel, \(late)")
        }
    }

    @Test(arguments: ServerStore.allCases) func aPastTimeSendsNowAndBadTimesStoreNothing(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let token = Harness.tokens(1, seed: 2313)[0]
            await BackendAPITests.register(server, user: "p", token: token)
            for (extra, error) in [
                (#","send_at":"tomorrow""#, "send_at must be an ISO-8601 time (\\\"2026-03-08T09:00:00Z\\\") or UNIX seconds"),
                (#","send_at":"2026-06-01 13:00""#, "send_at must be an ISO-8601 time (\\\"2026-03-08T09:00:00Z\\\") or UNIX seconds"),
                (#","send_at":-5"#, "send_at must be an ISO-8601 time (\\\"2026-03-08T09:00:00Z\\\") or UNIX seconds"),
                (#","send_at":true"#, "send_at must be an ISO-8601 time (\\\"2026-03-08T09:00:00Z\\\") or UNIX seconds"),
                (#","send_at":"2026-07-01T12:00:01Z""#, "send_at is more than 30 days ahead (schedule.horizon_days)"),
                (#","schedule_key":"k""#, "schedule_key needs send_at (it names a scheduled notification)"),
            ] {
                let r = await server.backend("POST", "/v1/notifications", Self.body(["p"], "Bad", extra: extra))
                #expect(r.status == 400 && r.body == #"{"success":false,"error":"\#(error)"}"#, "\(extra): \(r)")
            }
            // Exactly at the horizon is allowed; an hour ago goes now.
            let edge = await server.backend("POST", "/v1/notifications",
                                            Self.body(["p"], "Edge", extra: #","send_at":"2026-07-01T12:00:00+00:00""#))
            #expect(edge.status == 202, "\(edge)")
            let past = await server.backend("POST", "/v1/notifications",
                                            Self.body(["p"], "Past", extra: #","send_at":"2026-06-01T16:30:00.250+05:30""#))
            #expect(past.status == 202, "\(past)")
            try await Self.until("the past one is sent") { Self.titles(production, token) == ["Past"] }
            #expect(await server.backend("GET", "/v1/notifications/\(try #require(edge.json["notification_id"] as? String))")
                        .json["state"] as? String == "scheduled")
        }
    }

    /// A Live Activity update takes `send_at` too.
    @Test(arguments: ServerStore.allCases) func aLiveActivityUpdateCanBeScheduled(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let token = Harness.tokens(1, seed: 2314)[0]
            let registered = await server.backend("POST", "/v1/users/la/live-activity-tokens",
                                                  #"{"pushToken":"\#(token)","appType":"staff","attributesType":"DeliveryAttributes","activityId":"act-1"}"#)
            #expect(registered.status == 200, "\(registered)")
            let posted = await server.backend("POST", "/v1/live-activities",
                                              #"{"app_type":"staff","event":"update","activity_id":"act-1","content_state":{"eta":5},"send_at":"2026-06-01T12:30:00Z"}"#)
            #expect(posted.status == 202 && posted.json["state"] as? String == "scheduled", "\(posted)")
            clock.set("2026-06-01T12:30:00Z")
            try await Self.until("the update is sent") { production.attempts(for: token) == 1 }
        }
    }

    /// A `schedule_key` names a notification or a Live Activity, never both: a Live
    /// Activity end scheduled with a notification's key leaves that notification
    /// scheduled, and both go at their times.
    @Test(arguments: ServerStore.allCases) func aLiveActivityNeverSupersedesANotificationWithItsKey(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let t = Harness.tokens(2, seed: 2315)
            await BackendAPITests.register(server, user: "traveller", token: t[0])
            let registered = await server.backend("POST", "/v1/users/traveller/live-activity-tokens",
                                                  #"{"pushToken":"\#(t[1])","appType":"staff","attributesType":"DeliveryAttributes","activityId":"act-9"}"#)
            #expect(registered.status == 200, "\(registered)")
            let key = #","send_at":"2026-06-01T12:30:00Z","schedule_key":"trip-9""#
            let notification = await server.backend("POST", "/v1/notifications", Self.body(["traveller"], "Trip", extra: key))
            #expect(notification.status == 202, "\(notification)")
            let id = try #require(notification.json["notification_id"] as? String)
            let ended = await server.backend("POST", "/v1/live-activities",
                                             #"{"app_type":"staff","event":"end","activity_id":"act-9","content_state":{"eta":0}\#(key)}"#)
            #expect(ended.status == 202 && ended.json["state"] as? String == "scheduled", "\(ended)")
            #expect(ended.json["superseded"] == nil, "\(ended)")
            #expect(await server.backend("GET", "/v1/notifications/\(id)").json["state"] as? String == "scheduled")

            clock.set("2026-06-01T12:30:00Z")
            try await Self.until("both are sent") {
                production.attempts(for: t[0]) == 1 && production.attempts(for: t[1]) == 1
            }
            #expect(Self.titles(production, t[0]) == ["Trip"])
        }
    }
}
