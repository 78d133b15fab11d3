import APNsMock
import Foundation
import Testing
import TestSupport

/// An APNs that accepts requests and never answers, against the real binary: SIGTERM
/// still ends in `shutdown_grace_seconds` with exit 0 and gives back what was not
/// answered; fan-outs handed to a worker loop stay under the hand-off bound; and a
/// restart against an APNs that answers delivers everything exactly once.
@Suite struct ShutdownAndBackPressureTests {
    /// Outbox rows leased to a worker (handed over or claimed), read from the file.
    static func leased(_ server: ServerProcess) -> Int {
        let r = runSync("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], timeout=30)
            print(db.execute("SELECT count(*) FROM outbox WHERE claimed_by IS NOT NULL").fetchone()[0])
            """, server.databasePath])
        return Int(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    static func stalledMock() throws -> MockServer {
        try Harness.mock(sandbox: false) {
            $0.stall = true
            $0.recordCap = 50_000
        }
    }

    /// SIGTERM while every request sent waits for an answer that never comes: the
    /// process exits 0 within the grace (3 s here; the wait allowed is only a hang
    /// guard), every delivery is back in the outbox unleased and due (the lease is
    /// 10 minutes: a restart that had to wait it out would hang), and a restart
    /// against an APNs that answers sends each exactly once, with one final entry.
    @Test func sigtermWithAnAPNsThatNeverAnswersExitsWithinTheGrace() async throws {
        let stalled = try Self.stalledMock()
        defer { stalled.stop() }
        var options = ServerProcess.Options()
        options.leaseSeconds = 600
        options.batchSize = 100
        options.extraTopLevel = "shutdown_grace_seconds: 3\nshutdown_write_back_seconds: 300"
        let server = ServerProcess(sandbox: nil, production: stalled, options: options)
        let count = 500
        let tokens = Harness.tokens(count, seed: 71)
        let id = try await DurabilityTests.startAndNotify(server, company: "grace-co", tokens: tokens)
        let end = Date().addingTimeInterval(60)
        while stalled.recordedRequests().isEmpty && Date() < end { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!stalled.recordedRequests().isEmpty, "requests went out and wait for their answers")

        // Hang guard: far past the grace and the write-back the server is given (as long
        // as the whole suite's load can make a write of milliseconds take); the harness
        // kills (status 9) when it runs out.
        let status = await server.stop(SIGTERM, timeout: 400)
        #expect(status == 0, "\(server.stderr)")
        #expect(try await server.store().outboxDepth() == count, "nothing was answered, nothing is lost")
        #expect(Self.leased(server) == 0, "given back to the outbox, not left leased: \(server.stderr)")

        let answering = try Harness.mock(sandbox: false) { $0.recordCap = 50_000 }
        defer { answering.stop() }
        try server.retarget(production: answering)
        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 180)
        let log = await server.backend("GET", "/v1/notifications/\(id)?limit=10000").json
        #expect(log["summary"] as? [String: Int] == ["pending": 0, "delivered": count, "failed": 0])
        var sent: [String: Int] = [:]
        for request in answering.recordedRequests() { sent[request.token ?? "", default: 0] += 1 }
        #expect(sent.count == count && sent.values.allSatisfy { $0 == 1 }, "each sent once to the APNs that answers")
    }

    /// A fan-out of 6,000 while APNs never answers: what is handed to the worker
    /// loops (leased, in memory) stays under the bound (2 loops × (hand-off limit
    /// 500 + what a loop has in hand: 4 batches of 100 and one more), plus one
    /// fan-out part of 1,000 leased for the moment before its overflow is given
    /// back), the rest waits in the outbox for ordinary claims. Without the bound, all 6,000 were
    /// handed over and held. After a restart against an APNs that answers, each is
    /// delivered exactly once.
    @Test func aFanOutHandedToABusyLoopStaysUnderTheBound() async throws {
        let stalled = try Self.stalledMock()
        defer { stalled.stop() }
        var options = ServerProcess.Options()
        options.leaseSeconds = 600
        options.batchSize = 100
        options.fanOutPart = 1000
        options.handoffLimit = 500
        options.extraTopLevel = "shutdown_grace_seconds: 2\nshutdown_write_back_seconds: 300"
        let server = ServerProcess(sandbox: nil, production: stalled, options: options)
        let count = 6000
        let tokens = Harness.tokens(count, seed: 72)
        let id = try await DurabilityTests.startAndNotify(server, company: "bound-co", tokens: tokens)
        let end = Date().addingTimeInterval(60)
        while stalled.recordedRequests().isEmpty && Date() < end { try await Task.sleep(for: .milliseconds(10)) }
        let bound = 2 * (500 + 5 * 100) + 1000
        var most = 0
        for _ in 0..<10 {
            most = max(most, Self.leased(server))
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(most > 0 && most <= bound, "\(most) leased at most, bound \(bound), of \(count)")
        #expect(await server.stop(SIGTERM, timeout: 400) == 0, "\(server.stderr)")

        let answering = try Harness.mock(sandbox: false) { $0.recordCap = 50_000 }
        defer { answering.stop() }
        try server.retarget(production: answering)
        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 180)
        let log = await server.backend("GET", "/v1/notifications/\(id)?limit=10000").json
        #expect(log["summary"] as? [String: Int] == ["pending": 0, "delivered": count, "failed": 0])
        var sent: [String: Int] = [:]
        for request in answering.recordedRequests() { sent[request.token ?? "", default: 0] += 1 }
        #expect(sent.count == count && sent.values.allSatisfy { $0 == 1 })
    }
}

/// `/metrics` takes a bearer (an API key, or the `metrics_token_file` token), and
/// its outbox gauges come from the service's own count, right after a fan-out and
/// after delivery.
@Suite struct MetricsAccessTests {
    static let token = "metrics-scraper-token-0123456789"

    @Test func metricsNeedACredential() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "metrics_token_file: metrics.token"
        let server = InProcessServer(sandbox: nil, production: nil, options: options)
        _ = server.files.scratch.file("metrics.token", Self.token + "\n")
        try await server.start()
        defer { Task { await server.stop() } }
        let anonymous = await server.request("GET", "/metrics")
        #expect(anonymous.status == 401 && anonymous.json["success"] as? Bool == false, "\(anonymous.status) \(anonymous.body)")
        let wrong = await server.request("GET", "/metrics", bearer: "metrics-scraper-token-0123456780")
        #expect(wrong.status == 401)
        let user = await server.request("GET", "/metrics", bearer: Harness.jwt(sub: "u1"))
        #expect(user.status == 401, "an app user's token is not enough")
        let byToken = await server.request("GET", "/metrics", bearer: Self.token)
        #expect(byToken.status == 200 && byToken.body.contains("apns_server_outbox_depth"))
        let byKey = await server.metrics()
        #expect(byKey.status == 200 && byKey.body.contains("apns_server_outbox_depth"))
    }

    /// 40 deliveries to an APNs that never answers: the depth gauge says 40; after
    /// a restart against one that answers, 0 (each read as the scrape shows it, up
    /// to a hang guard: the count runs every 100 ms here).
    @Test func theOutboxGaugesFollowAFanOutAndItsDelivery() async throws {
        let stalled = try ShutdownAndBackPressureTests.stalledMock()
        defer { stalled.stop() }
        var options = ServerProcess.Options()
        options.extraTopLevel = "shutdown_grace_seconds: 2\nshutdown_write_back_seconds: 300"
        let server = ServerProcess(sandbox: nil, production: stalled, options: options)
        _ = try await DurabilityTests.startAndNotify(server, company: "gauge-co", tokens: Harness.tokens(40, seed: 73))
        #expect(try await Self.gauge(server, "apns_server_outbox_depth 40.0\n"))
        #expect(await server.stop(SIGTERM, timeout: 400) == 0, "\(server.stderr)")

        let answering = try Harness.mock(sandbox: false)
        defer { answering.stop() }
        try server.retarget(production: answering)
        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 120)
        #expect(try await Self.gauge(server, "apns_server_outbox_depth 0.0\n"))
        #expect(try await Self.gauge(server, "apns_server_outbox_waiting 0.0\n"))
    }

    static func gauge(_ server: ServerProcess, _ line: String) async throws -> Bool {
        let end = Date().addingTimeInterval(60)
        while Date() < end {
            if await server.metrics().body.contains(line) { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }
}
