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

    /// Foundation's parser read "+5:30" as +05:00 (half an hour early), took
    /// "+99:00", read "2026-02-30" as 2 March and echoed 1969 as a broken time:
    /// each is a 400 that stores nothing, on notifications and Live Activities alike.
    @Test(arguments: ServerStore.allCases) func sendAtIsReadStrictly(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            await BackendAPITests.register(server, user: "s", token: Harness.tokens(1, seed: 2316)[0])
            let error = #"{"success":false,"error":"send_at must be an ISO-8601 time (\"2026-03-08T09:00:00Z\") or UNIX seconds"}"#
            for bad in ["2026-06-02T09:00:00+5:30", "2026-06-02T09:00:00+99:00", "2026-06-02T09:00:00+05:60",
                        "2026-02-30T09:00:00Z", "2026-06-31T09:00:00Z", "2026-06-02T24:00:00Z", "2026-06-02T09:00:60Z",
                        "1969-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2026-06-02T09:00:00", "2026-06-02T09:00Z",
                        "2026-06-02T09:00:00.Z", "2026-06-02T09:00:00Z ", " 2026-06-02T09:00:00Z", "+2026-06-02T09:00:00Z",
                        "2026-6-2T09:00:00Z", "2026-06-02T09:00:00+0530"] {
                let r = await server.backend("POST", "/v1/notifications", Self.body(["s"], "Bad", extra: #","send_at":"\#(bad)""#))
                #expect(r.status == 400 && r.body == error, "\(bad): \(r)")
                let la = await server.backend("POST", "/v1/live-activities",
                    #"{"app_type":"staff","event":"update","activity_id":"a1","content_state":{"n":1},"send_at":"\#(bad)"}"#)
                #expect(la.status == 400 && la.body == error, "\(bad): \(la)")
            }
            // Good spellings: an offset's minutes count, fractions and a lower-case t and z are RFC 3339's.
            for (good, echoed) in [("2026-06-02T09:00:00+05:30", "2026-06-02T03:30:00.000Z"),
                                   ("2026-06-02T09:00:00.25-01:15", "2026-06-02T10:15:00.250Z"),
                                   ("2026-06-02t09:00:00.123456z", "2026-06-02T09:00:00.123Z"),
                                   ("2028-02-29T00:00:00Z", nil)] {
                let r = await server.backend("POST", "/v1/notifications", Self.body(["s"], "Good", extra: #","send_at":"\#(good)""#))
                if let echoed {
                    #expect(r.status == 202 && r.json["send_at"] as? String == echoed, "\(good): \(r)")
                } else {
                    #expect(r.status == 400 && r.body.contains("more than 30 days ahead"), "a leap day is a day: \(r)")
                }
            }
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

    /// Activity ids were compared byte for byte: another user registered the lower-case
    /// spelling of an owner's id, and a scheduled update to it reached them. A
    /// UUID-shaped id is one activity however it is spelled, wherever it enters;
    /// white space around one is a 400.
    @Test(arguments: ServerStore.allCases) func anActivityIDIsOneActivityInEitherCase(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: Self.t0)
        try await withClockedServer(store, production: production, clock: clock) { server in
            let t = Harness.tokens(2, seed: 2317)
            let upper = "8A3F5C2E-1B4D-4E6F-9A7B-0C1D2E3F4A5B", lower = upper.lowercased()
            func register(_ user: String, _ token: String, _ activity: String) async -> HTTPResponse {
                await server.request("POST", "/api/user/live-activity-token",
                    body: #"{"pushToken":"\#(token)","appType":"staff","attributesType":"DeliveryAttributes","activityId":"\#(activity)"}"#,
                    bearer: Harness.jwt(sub: user))
            }
            #expect(await register("owner", t[0], upper).status == 200)
            let intruder = await register("intruder", t[1], lower)
            #expect(intruder.status == 409 && intruder.body == #"{"success":false,"error":"activityId is registered to another user"}"#,
                    "\(intruder)")
            let byBackend = await server.backend("POST", "/v1/users/intruder/live-activity-tokens",
                #"{"pushToken":"\#(t[1])","appType":"staff","attributesType":"DeliveryAttributes","activityId":"\#(lower)"}"#)
            #expect(byBackend.status == 409, "\(byBackend)")
            for spaced in [" \(lower)", "\(lower)\\n", "\(upper)\\t"] {
                let r = await register("intruder", t[1], spaced)
                #expect(r.status == 400 && r.body == #"{"success":false,"error":"activityId must not begin or end with white space"}"#,
                        "\(spaced): \(r)")
                let send = await server.backend("POST", "/v1/live-activities",
                    #"{"app_type":"staff","event":"update","activity_id":"\#(spaced)","content_state":{"eta":1}}"#)
                #expect(send.status == 400 && send.body == #"{"success":false,"error":"activity_id must not begin or end with white space"}"#,
                        "\(spaced): \(send)")
            }
            let listed = await server.request("GET", "/api/user/live-activity-tokens", bearer: Harness.jwt(sub: "owner"))
            #expect((listed.json["tokens"] as? [[String: Any]])?.first?["activity_id"] as? String == lower, "\(listed)")

            // A scheduled update and a send now, each in the other spelling: the owner's token, no one else's.
            let posted = await server.backend("POST", "/v1/live-activities",
                #"{"app_type":"staff","event":"update","activity_id":"\#(lower)","content_state":{"eta":5},"send_at":"2026-06-01T12:30:00Z"}"#)
            #expect(posted.status == 202, "\(posted)")
            clock.set("2026-06-01T12:30:00Z")
            try await Self.until("the update is sent") { production.attempts(for: t[0]) == 1 }
            let now = await server.backend("POST", "/v1/live-activities",
                #"{"app_type":"staff","event":"update","activity_id":"\#(upper)","content_state":{"eta":4}}"#)
            #expect(now.status == 202 && now.json["deliveries"] as? Int == 1, "\(now)")
            try await Self.until("the second update is sent") { production.attempts(for: t[0]) == 2 }
            try await server.drained()
            #expect(production.attempts(for: t[1]) == 0)
        }
    }
}
