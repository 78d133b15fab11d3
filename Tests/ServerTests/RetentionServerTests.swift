import APNsMock
import Foundation
import Testing
import TestSupport

/// `retention:` in the config: the real server prunes what is older than `days` and
/// final, on its own, with time moved by the test (`FakeClock`, in process).
@Suite struct RetentionServerTests {
    @Test func theServerPrunesOldFinishedNotificationsOnly() async throws {
        let clock = FakeClock(at: "2026-05-01T12:00:00Z")
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        var options = ServerProcess.Options()
        options.extraTopLevel = "retention:\n  days: 1\n  interval_seconds: 1"
        let server = InProcessServer(sandbox: nil, production: production, options: options, clock: clock)
        try await server.start()
        defer { Task { await server.stop() } }
        let tokens = Harness.tokens(2, seed: 170)
        await BackendAPITests.register(server, user: "r0", token: tokens[0])
        await BackendAPITests.register(server, user: "r1", token: tokens[1])

        func notify(_ user: String) async throws -> String {
            let r = await server.backend("POST", "/v1/notifications",
                #"{"type":"order_created","app_type":"staff","user_ids":["\#(user)"],"alert":{"title":"t","body":"b"}}"#)
            #expect(r.status == 202, "\(r.body)")
            return try #require(r.json["notification_id"] as? String)
        }
        let old = try await notify("r0")
        clock.set(Instants.millis("2026-05-02T11:00:00Z"))
        let recent = try await notify("r1")
        try await server.drained()
        #expect(await server.backend("GET", "/v1/notifications/\(old)").status == 200)

        // A day and a minute after the first: only it is past the retention.
        clock.set(Instants.millis("2026-05-02T12:01:00Z"))
        let end = Date().addingTimeInterval(60)
        while await server.backend("GET", "/v1/notifications/\(old)").status != 404 {
            try #require(Date() < end, "the old notification was never pruned")
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(await server.backend("GET", "/v1/notifications/\(recent)").status == 200)
        let metrics = await server.metrics().body
        #expect(metrics.contains(#"apns_server_log_pruned_total{kind="notification"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"apns_server_log_pruned_total{kind="delivery"} 1"#))
    }

    @Test func aBadRetentionIsOneLineAndExit2() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        for (value, expected) in [("retention:\n  days: -1", "retention.days must be an integer in 0...36500"),
                                  ("retention:\n  keep: 3", "unknown key retention.keep"),
                                  ("retention: 30", "retention must be a mapping")] {
            let path = try ConfigTests.config(server, [("log_level: warning", "log_level: warning\n\(value)")])
            let r = await ConfigTests.run(["--config", path])
            #expect(r.status == 2, "\(value): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(expected), "\(value): \(r.stderr)")
        }
    }
}
