import APNsMock
import Foundation
import Testing
import TestSupport

/// Quiet hours in process against the real mock, on a clock the test moves
/// (`FakeClock`): silent and deferred deliveries across midnight and across
/// daylight-saving changes in real zones, the critical override, and the
/// preferences that set them.
@Suite struct QuietHoursTests {
    static let quiet2200to0800 = #""quietHoursEnabled":true,"quietHoursStart":"22:00","quietHoursEnd":"08:00""#

    /// Whether the request went out silenced: no sound, interruption-level passive.
    static func isSilent(_ aps: [String: Any]) -> Bool {
        aps["sound"] == nil && aps["interruption-level"] as? String == "passive"
    }

    /// `silent`: delivered at once, without sound, while the user's local time is in
    /// the window (start included, end excluded); across midnight, and on both
    /// daylight-saving changes in Europe/London (where a fixed offset would be an
    /// hour wrong).
    @Test func silentAcrossMidnightAndDaylightSaving() async throws {
        let clock = FakeClock(at: "2026-01-15T21:59:00Z")
        let (mock, server) = try await Held.start(clock)
        defer { mock.stop(); Task { await server.stop() } }
        let t = Harness.tokens(2, seed: 140)
        await Held.user(server, "night", token: t[0], app: "chill", preferences: "{\(Self.quiet2200to0800)}")
        await Held.user(server, "london", token: t[1], app: "chill",
                        preferences: #"{\#(Self.quiet2200to0800),"timeZone":"Europe/London"}"#)

        let cases: [(String, String, Bool, String)] = [
            ("2026-01-15T21:59:00Z", "night", false, "21:59 UTC: before the window"),
            ("2026-01-15T22:00:00Z", "night", true, "22:00 UTC: the start is quiet"),
            ("2026-01-16T00:30:00Z", "night", true, "00:30 UTC: past midnight, still quiet"),
            ("2026-01-16T07:59:59Z", "night", true, "07:59:59 UTC: quiet"),
            ("2026-01-16T08:00:00Z", "night", false, "08:00 UTC: the end is not quiet"),
            // London springs forward on 29 March 2026 at 01:00 GMT.
            ("2026-03-28T21:59:00Z", "london", false, "21:59 GMT"),
            ("2026-03-28T22:00:00Z", "london", true, "22:00 GMT"),
            ("2026-03-29T06:59:00Z", "london", true, "07:59 BST"),
            ("2026-03-29T07:15:00Z", "london", false, "08:15 BST (07:15 GMT would be quiet)"),
            // And falls back on 25 October 2026 at 01:00 GMT.
            ("2026-10-24T21:30:00Z", "london", true, "22:30 BST (21:30 GMT would not be quiet)"),
            ("2026-10-25T07:30:00Z", "london", true, "07:30 GMT, after the fall-back"),
            ("2026-10-25T08:00:00Z", "london", false, "08:00 GMT"),
        ]
        for (now, user, silent, why) in cases {
            clock.set(now)
            let (apnsID, _) = try await Held.notify(server, #"""
                "type":"message","app_type":"chill","user_ids":["\#(user)"],"alert":{"title":"Dinner","body":"at 8"},"sound":"default"
                """#)
            let log = try await Held.wait(server, apnsID)
            #expect(log["not_before"] == nil, "\(why): silent is never held")
            let aps = try Held.sentPayload(mock, apnsID).aps
            #expect(Self.isSilent(aps) == silent, "\(why): \(aps)")
            if !silent {
                #expect(aps["sound"] as? String == "default" && aps["interruption-level"] == nil, "\(why): \(aps)")
            }
        }
    }

    /// `defer`: held in the outbox until the window's end in the user's zone (08:00
    /// local, which a DST change moves in UTC), sent then, with its sound; one per
    /// device and collapse id, the latest winning; nothing sent before.
    @Test func deferUntilTheEndAcrossMidnightAndDaylightSaving() async throws {
        // 23:00 EST on 7 March 2026; New York springs forward at 02:00 on 8 March.
        let clock = FakeClock(at: "2026-03-08T04:00:00Z")
        let (mock, server) = try await Held.start(clock)
        defer { mock.stop(); Task { await server.stop() } }
        let t = Harness.tokens(4, seed: 141)
        let newYork = #"{\#(Self.quiet2200to0800),"timeZone":"America/New_York"}"#
        await Held.user(server, "ny", token: t[0], app: "travel", preferences: newYork)
        await Held.user(server, "ny2", token: t[1], app: "travel", preferences: newYork)
        await Held.user(server, "awake", token: t[2], app: "travel")
        await Held.user(server, "london", token: t[3], app: "travel",
                        preferences: #"{\#(Self.quiet2200to0800),"timeZone":"Europe/London"}"#)
        func message(_ user: String, _ body: String, _ extra: String = "") -> String {
            #""type":"message","app_type":"travel","user_ids":["\#(user)"],"alert":{"title":"Trip","body":"\#(body)"},"sound":"default"\#(extra)"#
        }

        let held = try await Held.notify(server, message("ny", "held"))
        // 08:00 EDT is 12:00 UTC (13:00 with the night's EST offset).
        #expect(await Held.delivery(server, held.apnsID)["not_before"] as? String == "2026-03-08T12:00:00.000Z")
        #expect(await Held.delivery(server, held.apnsID)["state"] as? String == "pending")

        // The latest of one collapse id wins; one without a collapse id is its own.
        let v1 = try await Held.notify(server, message("ny2", "v1", #","collapse_id":"trip-42""#))
        let v2 = try await Held.notify(server, message("ny2", "v2", #","collapse_id":"trip-42""#))
        let own = try await Held.notify(server, message("ny2", "own"))
        let superseded = await Held.delivery(server, v1.apnsID)
        #expect(superseded["state"] as? String == "superseded")
        #expect(superseded["carried_by"] as? String == v2.apnsID)
        let summary = await server.backend("GET", "/v1/notifications/\(v1.id)").json["summary"] as? [String: Int]
        #expect(summary == ["pending": 0, "delivered": 0, "failed": 0, "superseded": 1])

        // A millisecond before the end: the worker claims (a user without quiet hours
        // gets hers) and leaves the held ones alone.
        clock.set("2026-03-08T11:59:59.999Z")
        let probe = try await Held.notify(server, message("awake", "now"))
        try await Held.wait(server, probe.apnsID)
        #expect(mock.attempts(for: t[0]) == 0 && mock.attempts(for: t[1]) == 0)
        #expect(await Held.delivery(server, held.apnsID)["state"] as? String == "pending")

        clock.set("2026-03-08T12:00:00Z")
        try await Held.wait(server, held.apnsID)
        try await Held.wait(server, v2.apnsID)
        try await Held.wait(server, own.apnsID)
        let aps = try Held.sentPayload(mock, held.apnsID).aps
        #expect(aps["sound"] as? String == "default" && aps["interruption-level"] == nil, "deferred, not silenced: \(aps)")
        #expect(mock.attempts(for: t[0]) == 1)
        #expect(mock.attempts(for: t[1]) == 2, "v2 and own; v1 never")
        #expect(Held.sent(mock, v1.apnsID).isEmpty)
        #expect(Held.sent(mock, v2.apnsID).first?.header("apns-collapse-id") == "trip-42")
        #expect(await Held.delivery(server, v1.apnsID)["state"] as? String == "superseded")

        // London falls back on 25 October: 23:00 BST to 08:00 GMT is ten hours.
        clock.set("2026-10-24T22:00:00Z")
        let autumn = try await Held.notify(server, message("london", "autumn"))
        #expect(await Held.delivery(server, autumn.apnsID)["not_before"] as? String == "2026-10-25T08:00:00.000Z")
        clock.set("2026-10-25T08:00:00Z")
        try await Held.wait(server, autumn.apnsID)
        #expect(mock.attempts(for: t[3]) == 1)
    }

    /// `"priority":"critical"`, or a type the app marks critical, goes through quiet
    /// hours (neither held nor silenced). The named priorities map to APNs' header
    /// and the interruption level.
    @Test func criticalOverridesQuietHours() async throws {
        let clock = FakeClock(at: "2026-01-15T23:00:00Z")
        let (mock, server) = try await Held.start(clock)
        defer { mock.stop(); Task { await server.stop() } }
        let t = Harness.tokens(2, seed: 142)
        await Held.user(server, "deferred", token: t[0], app: "travel", preferences: "{\(Self.quiet2200to0800)}")
        await Held.user(server, "silenced", token: t[1], app: "chill", preferences: "{\(Self.quiet2200to0800)}")
        func send(_ app: String, _ user: String, type: String = "message", priority: String? = nil) async throws -> String {
            let p = priority.map { #","priority":"\#($0)""# } ?? ""
            return try await Held.notify(server, #"""
                "type":"\#(type)","app_type":"\#(app)","user_ids":["\#(user)"],"alert":"Gate changed","sound":"default"\#(p)
                """#).apnsID
        }

        let critical = try await send("travel", "deferred", priority: "critical")
        try await Held.wait(server, critical)
        var aps = try Held.sentPayload(mock, critical).aps
        #expect(aps["sound"] as? String == "default" && aps["interruption-level"] as? String == "time-sensitive")
        #expect(Held.sent(mock, critical).first?.header("apns-priority") == "10")

        let broadcast = try await send("travel", "deferred", type: "broadcast")
        try await Held.wait(server, broadcast)
        aps = try Held.sentPayload(mock, broadcast).aps
        #expect(aps["sound"] as? String == "default" && aps["interruption-level"] == nil, "a critical type: \(aps)")

        let criticalSilent = try await send("chill", "silenced", priority: "critical")
        try await Held.wait(server, criticalSilent)
        #expect(try Held.sentPayload(mock, criticalSilent).aps["sound"] as? String == "default")

        let high = try await send("chill", "silenced", priority: "high")
        try await Held.wait(server, high)
        #expect(Self.isSilent(try Held.sentPayload(mock, high).aps), "high is not critical: silenced")

        let low = try await send("travel", "deferred", priority: "low")
        #expect(await Held.delivery(server, low)["not_before"] as? String == "2026-01-16T08:00:00.000Z")
        clock.set("2026-01-16T08:00:00Z")
        try await Held.wait(server, low)
        aps = try Held.sentPayload(mock, low).aps
        #expect(aps["interruption-level"] as? String == "passive" && aps["sound"] as? String == "default")
        #expect(Held.sent(mock, low).first?.header("apns-priority") == "5")

        let bad = await server.backend("POST", "/v1/notifications",
            #"{"type":"message","app_type":"travel","user_ids":["deferred"],"alert":"x","priority":"urgent"}"#)
        #expect(bad.status == 400 && bad.body.contains("priority must be low, normal, high or critical"), "\(bad.body)")
    }

    /// The quiet-hours keys go through the seed's preferences endpoints: listed with
    /// their defaults where the app declares quiet hours, checked (bad times and
    /// zones are a 400 that changes nothing), and kept as given.
    @Test func quietHoursPreferences() async throws {
        let clock = FakeClock(at: "2026-01-15T12:00:00Z")
        let (mock, server) = try await Held.start(clock)
        defer { mock.stop(); Task { await server.stop() } }
        let token = Harness.tokens(1, seed: 143)[0]
        await Held.user(server, "prefs", token: token, app: "travel")
        let jwt = Harness.jwt(sub: "prefs")
        let path = "/api/user/push-preferences?appType=travel"

        var r = await server.request("GET", path, bearer: jwt)
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"broadcasts":true,"messages":true,"quietHoursEnabled":false,"quietHoursStart":"22:00","quietHoursEnd":"08:00","timeZone":"UTC"}}"#)

        let bad: [(String, String)] = [
            (#"{"quietHoursStart":"25:00"}"#, "quietHoursStart' must be a time"),
            (#"{"quietHoursEnd":"8:00"}"#, "quietHoursEnd' must be a time"),
            (#"{"quietHoursStart":2200}"#, "quietHoursStart' must be a time"),
            (#"{"quietHoursEnabled":"yes"}"#, "quietHoursEnabled' must be true or false"),
            (#"{"timeZone":"Mars/Olympus_Mons"}"#, "timeZone' must be an IANA time zone"),
            (#"{"timeZone":"GMT+2"}"#, "timeZone' must be an IANA time zone"),
            (#"{"messages":false,"timeZone":"EST5EDT and more"}"#, "timeZone' must be an IANA time zone"),
        ]
        for (body, message) in bad {
            r = await server.request("PUT", path, body: body, bearer: jwt)
            #expect(r.status == 400 && r.body.contains(message), "\(body): \(r.body)")
        }
        r = await server.request("PUT", path,
                                 body: #"{"quietHoursEnabled":true,"quietHoursStart":"23:30","timeZone":"America/New_York"}"#,
                                 bearer: jwt)
        #expect(r.body == #"{"success":true,"message":"Push preferences updated successfully"}"#)
        r = await server.request("GET", path, bearer: jwt)
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"broadcasts":true,"messages":true,"quietHoursEnabled":true,"quietHoursStart":"23:30","quietHoursEnd":"08:00","timeZone":"America/New_York"}}"#)

        // An app that does not declare quiet_hours (the seed's RepairMinder) lists the
        // keys only once the user saved one; its quiet hours are silent.
        r = await server.request("GET", "/api/user/push-preferences?appType=customer", bearer: jwt)
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"orderStatusChanged":true,"quoteApproved":true}}"#)
        r = await server.request("PUT", "/api/user/push-preferences?appType=customer", body: #"{"quietHoursEnabled":true}"#, bearer: jwt)
        #expect(r.status == 200)
        r = await server.request("GET", "/api/user/push-preferences?appType=customer", bearer: jwt)
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"orderStatusChanged":true,"quoteApproved":true,"quietHoursEnabled":true,"quietHoursStart":"22:00","quietHoursEnd":"08:00","timeZone":"UTC"}}"#)
    }
}
