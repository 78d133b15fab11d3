import APNsMock
import Foundation
import Testing
import TestSupport

/// Batching against the real mock: updates about one entity within a window are
/// one send when it closes, and every update keeps its own row in the log (in
/// process, on a clock the test moves: `FakeClock`); a window survives kill -9 (the
/// release binary on the real time: a process is the point).
@Suite struct CoalesceTests {
    static let start = "2026-05-05T10:00:00Z"
    /// The window of the kill -9 test, in seconds: three updates, a kill, a restart
    /// and two more updates take under a second on an idle machine, and many times
    /// that beside the rest of the suite. The quiet hours' end, up to 70 s away, is
    /// waited for anyway.
    static let killWindow = 20

    static func update(_ user: String, job: String, title: String, body: String) -> String {
        #"""
        "type":"taskUpdate","entity_type":"task","entity_id":"\#(job)","entity_title":"\#(title)","app_type":"field","user_ids":["\#(user)"],"alert":{"title":"Job \#(job)","body":"\#(body)"},"sound":"default"
        """#
    }

    /// Five updates within 60 s: one send when the window closes, carrying the
    /// template's summary and a collapse-id of user, type and entity, `batched: 5`
    /// in the log, and five member rows pointing at it. Another entity's window
    /// stays apart; an update after the window opens a new one.
    @Test func fiveUpdatesInAWindowAreOneSend() async throws {
        let clock = FakeClock(at: Self.start)
        let (mock, server) = try await Held.start(clock)
        defer { mock.stop(); Task { await server.stop() } }
        let token = Harness.tokens(1, seed: 150)[0]
        await Held.user(server, "tech", token: token, app: "field")
        let t0 = clock.now

        var members: [(apnsID: String, id: String)] = []
        var elm: (apnsID: String, id: String)?
        for i in 0..<5 {
            clock.set(t0 + Int64(i) * 10_000)
            members.append(try await Held.notify(server, Self.update("tech", job: "job-1", title: "123 Main St", body: "update \(i)")))
            if i == 2 {
                elm = try await Held.notify(server, Self.update("tech", job: "job-2", title: "9 Elm Rd", body: "elm only"))
            }
        }
        let elmMember = try #require(elm)

        // Every update is a member, carried by one delivery of the first notification.
        let first = await Held.deliveries(server, members[0].id)
        #expect(first.count == 2, "the member and the window's carrier: \(first)")
        let carrierRow = try #require(first.first { $0["state"] as? String == "pending" })
        let carrier = try #require(carrierRow["apns_id"] as? String)
        for m in members {
            let row = await Held.delivery(server, m.apnsID)
            #expect(row["state"] as? String == "batched", "\(row)")
            #expect(row["carried_by"] as? String == carrier)
            #expect(row["not_before"] == nil, "a member never waits itself")
        }
        var log = await Held.delivery(server, carrier)
        #expect(log["batched"] as? Int == 5)
        #expect(log["not_before"] as? String == Instants.iso(t0 + 60_000))
        let elmCarrier = try #require(await Held.delivery(server, elmMember.apnsID)["carried_by"] as? String)
        #expect(elmCarrier != carrier)
        // The gauges are counted on their own clock (every 100 ms here): the count after this point.
        var metrics = ""
        let counted = Date().addingTimeInterval(300)    // a hang guard
        repeat {
            metrics = await server.metrics().body
            if metrics.contains("apns_server_outbox_waiting 2.0\n") && metrics.contains("apns_server_outbox_depth 2.0\n") { break }
            try await Task.sleep(for: .milliseconds(50))
        } while Date() < counted
        #expect(metrics.contains("apns_server_outbox_waiting 2.0\n") && metrics.contains("apns_server_outbox_depth 2.0\n"),
                "two windows' sends wait: \(metrics.split(separator: "\n").filter { $0.contains("outbox") })")

        // Before the window closes, the worker claims (another type gets through) and
        // leaves the windows alone.
        clock.set(t0 + 59_999)
        let probe = try await Held.notify(server, #"""
            "type":"taskAssignment","app_type":"field","user_ids":["tech"],"alert":"New job"
            """#)
        try await Held.wait(server, probe.apnsID)
        #expect(mock.attempts(for: token) == 1)

        clock.set(t0 + 60_000)
        log = try await Held.wait(server, carrier)
        #expect(log["batched"] as? Int == 5)
        let sent = Held.sent(mock, carrier)
        #expect(sent.count == 1)
        #expect(sent.first?.header("apns-collapse-id") == "tech|taskUpdate|job-1")
        let payload = try Held.sentPayload(mock, carrier)
        #expect(payload.aps["alert"] as? [String: String] == ["title": "Job job-1", "body": "5 updates on 123 Main St"])
        #expect(payload.all["entity_id"] as? String == "job-1")
        #expect(mock.attempts(for: token) == 2, "the probe and the one send")
        for m in members { #expect(Held.sent(mock, m.apnsID).isEmpty, "a member is never sent itself") }
        let summary = await server.backend("GET", "/v1/notifications/\(members[0].id)").json["summary"] as? [String: Int]
        #expect(summary == ["pending": 0, "delivered": 1, "failed": 0, "batched": 1])

        // The other entity's window closes 60 s after its own first update, and one
        // update is sent as it was (no summary for one).
        #expect(await Held.delivery(server, elmCarrier)["state"] as? String == "pending")
        clock.set(t0 + 80_000)
        try await Held.wait(server, elmCarrier)
        let elmPayload = try Held.sentPayload(mock, elmCarrier)
        #expect(elmPayload.aps["alert"] as? [String: String] == ["title": "Job job-2", "body": "elm only"])
        #expect(Held.sent(mock, elmCarrier).first?.header("apns-collapse-id") == "tech|taskUpdate|job-2")

        // After the window: a new window, a new carrier.
        clock.set(t0 + 90_000)
        let late = try await Held.notify(server, Self.update("tech", job: "job-1", title: "123 Main St", body: "late"))
        let lateCarrier = try #require(await Held.delivery(server, late.apnsID)["carried_by"] as? String)
        #expect(lateCarrier != carrier)
        #expect(await Held.delivery(server, lateCarrier)["not_before"] as? String == Instants.iso(t0 + 150_000))
        #expect(mock.attempts(for: token) == 3)
    }

    /// A window and a deferred delivery are in the database: kill -9 while both are
    /// held, restart, and each is sent exactly once, not before its time and not long
    /// after (the window still takes members after the restart). A process is the
    /// point, so this is the release binary on the real time: the window is
    /// `killWindow` long, and the quiet hours end at a whole minute (their unit) at
    /// least 10 s ahead, so the test waits up to 70 s.
    @Test func killMidWindowThenExactlyOneSend() async throws {
        let (mock, server) = try await Held.start(batchingWindow: Self.killWindow)
        defer { mock.stop(); Task { await server.stop() } }
        let t = Harness.tokens(3, seed: 151)
        await Held.user(server, "tech", token: t[0], app: "field")
        await Held.user(server, "sleeper", token: t[1], app: "travel")
        await Held.user(server, "awake", token: t[2], app: "field")

        // Quiet hours for the travel user, ending after the kill below, and a window
        // opening for the technician: one request each until the kill and two after the
        // restart (the apns-ids are read after those).
        let quietEnd = Instants.wholeMinute(atLeast: 10_000)
        await Held.prefer(server, "sleeper", app: "travel", Instants.quietHours(endingAt: quietEnd, in: "Asia/Tokyo"))
        let message = try await Held.post(server, #"""
            "type":"message","app_type":"travel","user_ids":["sleeper"],"alert":"Pickup at 9","sound":"default"
            """#)
        let opened = Instants.now
        var updates: [String] = []
        for i in 0..<3 {
            updates.append(try await Held.post(server, Self.update("tech", job: "job-7", title: "Depot", body: "u\(i)")))
        }

        await server.stop(SIGKILL)
        let killed = Instants.now
        #expect(mock.attempts(for: t[0]) == 0 && mock.attempts(for: t[1]) == 0)
        try await server.start()
        for i in 3..<5 {
            updates.append(try await Held.post(server, Self.update("tech", job: "job-7", title: "Depot", body: "u\(i)")))
        }

        // Both kept their times, the kill came before either was due, and the window
        // took the updates after the restart.
        let deferred = try await Held.firstDelivery(server, message)
        var members: [String] = []
        for id in updates { members.append(try await Held.firstDelivery(server, id)) }
        let window = Int64(Self.killWindow) * 1000
        let carrier = try #require(await Held.delivery(server, members[0])["carried_by"] as? String)
        let closes = try #require((await Held.delivery(server, carrier)["not_before"] as? String).map(Instants.millis))
        #expect(closes >= opened + window && closes <= killed + window, "the window closes \(window) ms after it opened")
        #expect(await Held.delivery(server, deferred)["not_before"] as? String == Instants.iso(quietEnd))
        #expect(killed < closes && killed < quietEnd, "killed at \(Instants.iso(killed)), while both were held")
        for m in members { #expect(await Held.delivery(server, m)["carried_by"] as? String == carrier, "one window across the restart") }

        let log = try await Held.wait(server, carrier)
        #expect(log["batched"] as? Int == 5)
        #expect(try Held.sentPayload(mock, carrier).aps["alert"] as? [String: String] == ["title": "Job job-7", "body": "5 updates on Depot"])
        let windowSent = try Held.sentAt(mock, carrier)
        #expect(windowSent >= closes - Instants.skew && windowSent <= closes + Instants.lateness,
                "sent at \(Instants.iso(windowSent)), the window closed at \(Instants.iso(closes))")

        try await Held.wait(server, deferred, timeout: 120)
        let deferredSent = try Held.sentAt(mock, deferred)
        #expect(deferredSent >= quietEnd - Instants.skew && deferredSent <= quietEnd + Instants.lateness,
                "sent at \(Instants.iso(deferredSent)), the quiet hours ended at \(Instants.iso(quietEnd))")

        // Another kill and restart sends neither again: once the restarted worker has
        // sent a new delivery, the old ones are still one request each.
        await server.stop(SIGKILL)
        try await server.start()
        let probe = try await Held.notify(server, #"""
            "type":"taskAssignment","app_type":"field","user_ids":["awake"],"alert":"New job"
            """#)
        try await Held.wait(server, probe.apnsID)
        #expect(mock.attempts(for: t[0]) == 1, "the window: exactly one send")
        #expect(mock.attempts(for: t[1]) == 1, "the deferred delivery: exactly one send")
        #expect(Held.sent(mock, carrier).count == 1)
    }
}
