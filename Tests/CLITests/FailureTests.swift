import APNsMock
import Foundation
import Testing
import TestSupport

/// No answer from the server, and interruptions: every token still gets exactly one record.
@Suite struct FailureTests {
    @Test func closedPortGivesStatusZeroForEveryTokenAndOneLineNamingTheEndpoint() async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let scratch = Scratch()
        let tokens = CLI.tokens(5)
        let endpoint = "https://127.0.0.1:\(port)"
        let r = await CLI.run(["--topic", CLI.pki.topic] + CLI.credentials()
                        + ["--endpoint", endpoint, "--cacert", CLI.pki.caFile, "--retries", "2", "--timeout", "2",
                           CLI.payload, scratch.file("t.txt", (tokens + ["xyz"]).joined(separator: "\n"))])
        #expect(r.status == 1)
        let records = try Record.parse(r.stdout)
        #expect(records.count == tokens.count + 1)
        #expect(records.allSatisfy { $0.status == 0 && $0.hasContractKeyOrder })
        #expect(records.filter { $0.reason == nil }.allSatisfy { $0.error != nil && $0.attempts >= 1 })
        let named = CLI.lines(r.stderr).filter { $0.contains(endpoint) }
        #expect(named.count == 1, "\(r.stderr)")
        #expect(named.first?.contains("unreachable") == true)
    }

    /// A server whose certificate the client does not trust is unreachable too:
    /// verification is never turned off.
    @Test(arguments: ["curl", "nghttp2"])
    func untrustedCertificateIsUnreachable(transport: String) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let other = scratch.path("other-pki")
        #expect(runSync("/bin/bash", [Package.root.appendingPathComponent("scripts/gen-pki.sh").path, other]).status == 0)
        let endpoint = "https://127.0.0.1:\(mock.port)"
        let r = await CLI.run(["--topic", CLI.pki.topic] + CLI.credentials()
                        + ["--endpoint", endpoint, "--cacert", other + "/ca.pem", "--transport", transport,
                           "--retries", "2", "--timeout", "2", CLI.payload, scratch.file("t.txt", CLI.tokens(3).joined(separator: "\n"))])
        #expect(r.status == 1)
        let records = try Record.parse(r.stdout)
        #expect(records.count == 3)
        #expect(records.allSatisfy { $0.status == 0 && $0.error != nil })
        #expect(CLI.lines(r.stderr).filter { $0.contains(endpoint) && $0.contains("unreachable") }.count == 1, "\(r.stderr)")
        #expect(mock.statistics().streams == 0)
        #expect(mock.statistics(once: { $0.handshakesFailed >= 1 }).handshakesFailed >= 1)
    }

    /// SIGINT mid-run: the requests in flight finish, every started token has its
    /// record, the rest are counted as not attempted, exit 1.
    @Test func interruptFinishesInFlightAndCountsTheRest() async throws {
        let mock = try CLI.mock { $0.latency = .milliseconds(100) }
        defer { mock.stop() }
        let scratch = Scratch()
        // 250 s of work at 4 × 100 ms: the interrupt lands mid-run even when this test's
        // task waits a long while for a thread (the suite runs tests side by side on 2
        // cores; a starved run once outlasted 50 s of work). The test ends at the interrupt.
        let tokens = CLI.tokens(10_000)
        let run = try SendProcess(CLI.arguments(mock) + ["--concurrency", "4", "--output", scratch.path("o.jsonl"),
                                                         CLI.payload, scratch.file("t.txt", tokens.joined(separator: "\n"))])
        // Wait until some records are written, then interrupt.
        try await run.waitUntil(deadline: 20) { mock.statistics().requests >= 8 }
        let (status, stderr) = await run.stop(SIGINT)
        #expect(status == 1, "\(stderr)")
        let records = try Record.parse(try String(contentsOfFile: scratch.path("o.jsonl"), encoding: .utf8))
        #expect(records.count >= 8 && records.count < tokens.count)
        #expect(records.filter { $0.status == 200 }.count == Int(mock.statistics().requests), "every answer was recorded")
        let line = try #require(CLI.lines(stderr).first { $0.contains("not attempted") })
        let notAttempted = Int(line.split(separator: " ").first { Int($0) != nil } ?? "") ?? -1
        #expect(records.count + notAttempted == tokens.count, "\(line)")
    }
}
