import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// Issue #5, item 1: one row per fault the mock injects, each over a batch of
/// 10,000 tokens (100,000 under `make soak`), each checked for the four
/// invariants (`MatrixOutcome.checkInvariants`) and for what its row promises.
/// One row at a time: each keeps a sender thread and a mock thread busy, and a dozen
/// such pairs side by side would starve the rest of the suite on a small machine.
@Suite(.serialized) struct FaultMatrixTests {
    // MARK: - Connections that end mid-batch

    /// "streams <= last-stream-id answered once; the rest sent again on a new connection"
    @Test(arguments: Transport.allCases)
    func gracefulGoawayEveryThousandStreams(transport: Transport) async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let mock = try FaultMatrix.mock { $0.goawayAfter = 1000 }
        let client = try FaultMatrix.client(port: mock.port, transport: transport)
        let results = try await FaultMatrix.send(client, tokens)
        let outcome = MatrixOutcome(tokens: tokens, results: results, mock: mock)

        outcome.checkInvariants(transport)
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        #expect(outcome.requests.values.allSatisfy { $0.count == 1 }, "each token processed exactly once")
        let stats = mock.statistics()
        #expect(stats.goawaysSent >= UInt64(tokens.count / 2000), "GOAWAY after GOAWAY: \(stats.goawaysSent)")
        #expect(stats.connectionsAccepted > stats.goawaysSent / 2, "the batch moved on to new connections")
        if transport == .nghttp2 {
            // libcurl sends what a GOAWAY refused again by itself; ours go back to the driver.
            #expect(client.statistics.notProcessed > 0)
            #expect(results.contains { $0.attempts > 1 }, "streams above last-stream-id were sent again")
            // ...ahead of new requests. Behind them the same tail met GOAWAY after GOAWAY:
            // 9 or 10 sends in a 10,000 batch, the whole refusal budget (16) and status 0
            // in a soak. Ahead, a token is refused again only when the next connection's
            // first streams went out before it was back: at most 4 sends seen, 6 in a soak.
            let most = results.map(\.attempts).max() ?? 0
            #expect(most <= 8, "a token was sent \(most) times: half its refusal budget")
        }
    }

    /// "in-flight streams sent again (same apns-id); final records complete"
    @Test(arguments: Transport.allCases)
    func tcpResetEveryThousandStreams(transport: Transport) async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let mock = try FaultMatrix.mock { $0.resetAfter = 1000 }
        let client = try FaultMatrix.client(port: mock.port, transport: transport)
        let results = try await FaultMatrix.send(client, tokens)
        let outcome = MatrixOutcome(tokens: tokens, results: results, mock: mock)

        outcome.checkInvariants(transport)
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        let stats = mock.statistics()
        #expect(stats.resetsDone >= UInt64(tokens.count / 2000), "reset after reset: \(stats.resetsDone)")
        // Each reset swallows at least the request it was triggered by, unanswered, and
        // the driver sends it again (libcurl may first try again by itself, unseen).
        let resent = results.filter { $0.attempts > 1 }
        #expect(resent.count >= Int(stats.resetsDone) || transport == .curl)
        #expect(resent.allSatisfy { outcome.requests[$0.token]?.last?.status == 200 })
    }

    // MARK: - No answer

    /// "per-request deadline fires; tokens end with status 0 and a clear error after the retry budget"
    @Test func aStalledServerEndsEveryTokenAfterItsRetryBudget() async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        // The server reads requests and never answers; without a first success its
        // stream limit stays at APNs' opening 1, so most attempts time out queued.
        let mock = try FaultMatrix.mock { $0.stall = true }
        let client = try FaultMatrix.client(port: mock.port, requestTimeout: .milliseconds(100))
        let results = try await FaultMatrix.send(client, tokens)
        let outcome = MatrixOutcome(tokens: tokens, results: results, mock: mock)

        outcome.checkInvariants()
        #expect(mock.statistics().requests == 0)
        // Each timed-out attempt ends its stream with RST_STREAM; a server guarding against
        // rapid resets (Debian's nghttp2 does, as APNs may) ends the connection after a
        // burst of them, and a batch whose connections close before any answer stops there.
        let endpoint = "127.0.0.1:\(mock.port)"
        let unclear = results.filter { r in
            let why = r.error ?? ""
            return r.status != 0 || !why.contains(endpoint)
                || !(why.contains("no answer within 100 ms") || why.contains("closed before any answer"))
        }
        #expect(unclear.count == 0, "\(unclear.prefix(2))")
        // Attempts a closing connection did not process are sent again on top of the budget.
        let timedOut = results.filter { $0.error?.contains("no answer within 100 ms") == true }
        #expect(!timedOut.isEmpty && timedOut.allSatisfy { $0.attempts >= Harness.retry.maxAttempts },
                "the deadline ends a token after its budget")
        #expect(outcome.requests.values.allSatisfy { $0.count <= Harness.retry.maxAttempts })
        #expect(!outcome.requests.isEmpty, "attempts reached the server")
    }

    enum Unanswered: String, CaseIterable, Sendable {
        case unreachable, untrustedCertificate, http1Only
    }

    /// "one clear error, status 0 records, no hang" (the CLI's exit 1 is CLITests.FailureTests')
    @Test(arguments: Unanswered.allCases)
    func noHTTP2EndpointGivesEveryTokenOneClearError(_ kind: Unanswered) async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let closed = ClosedPort()
        let mock = try FaultMatrix.mock()
        let http1 = kind == .http1Only ? try await Http1OnlyServer.start() : nil
        defer { withExtendedLifetime((closed, http1)) {} }
        let port = switch kind {
        case .unreachable: closed.port
        case .untrustedCertificate: mock.port
        case .http1Only: http1!.port
        }
        // Untrusted: only the system's CAs, which did not sign the mock's certificate.
        let client = try FaultMatrix.client(port: port, caFile: kind == .untrustedCertificate ? nil : TestPKI.shared.caFile)
        let results = try await FaultMatrix.send(client, tokens)

        MatrixOutcome(tokens: tokens, results: results, mock: mock).checkInvariants()
        #expect(results.allSatisfy { $0.status == 0 && $0.reason == nil && $0.attempts <= Harness.retry.maxAttempts })
        let errors = Set(results.map { $0.error ?? "none" })
        #expect(errors.count == 1, "\(errors.prefix(3))")
        #expect(errors.first?.contains("127.0.0.1:\(port)") == true, "\(errors.first ?? "")")
        #expect(mock.statistics().streams == 0)
    }

    // MARK: - Transient answers

    /// "429 / 503 / 500 storms: backoff with jitter (assert the spacing), delivered when the storm ends"
    @Test func transientStormsBackOffWithJitterThenDeliver() async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let storm: [MockAnswer] = [.serviceUnavailable, .tooManyRequests, .internalServerError]
        let mock = try FaultMatrix.mock {
            for (i, token) in tokens.enumerated() {
                $0.scripted[token] = (0..<storm.count).map { storm[(i + $0) % storm.count] }
            }
        }
        // Waits long against the scheduling noise of a loaded machine, short enough for a test.
        let retry = RetryPolicy(maxAttempts: storm.count + 1, initialBackoff: .milliseconds(100),
                                maxBackoff: .seconds(1), jitter: 0.5)
        let client = try FaultMatrix.client(port: mock.port, retry: retry)
        let results = try await FaultMatrix.send(client, tokens)
        let outcome = MatrixOutcome(tokens: tokens, results: results, mock: mock)

        outcome.checkInvariants()
        #expect(results.allSatisfy { $0.status == 200 && $0.attempts == retry.maxAttempts })
        #expect(outcome.requests.values.allSatisfy { $0.count == retry.maxAttempts })
        checkBackoff(outcome.requests.values.map { $0.map(\.received) }, retry)
    }

    /// The gaps between a token's attempts, as the mock received them. A loaded machine
    /// only ever lengthens them, so the bounds that hold whatever the load are the lower
    /// ones: each gap at least its jittered share of a backoff that doubles per attempt.
    /// Jitter shows as gaps shorter than the full backoff, which without it none can be.
    private func checkBackoff(_ arrivals: [[Duration]], _ retry: RetryPolicy) {
        var gaps = 0, early = 0
        for k in 0..<(retry.maxAttempts - 1) {
            let full = min(retry.initialBackoff * (1 << k), retry.maxBackoff)
            let floor = full * (1 - retry.jitter) - .milliseconds(1)
            let kth = arrivals.compactMap { $0.count > k + 1 ? $0[k + 1] - $0[k] : nil }
            #expect(kth.count == arrivals.count)
            let shortest = kth.min() ?? .zero
            #expect(shortest >= floor, "gap \(k + 1): \(shortest) is under the backoff's \(floor)")
            gaps += kth.count
            early += kth.filter { $0 < full }.count
        }
        #expect(early >= gaps / 100, "only \(early) of \(gaps) gaps under the full backoff: no jitter?")
    }

    // MARK: - Provider tokens

    /// "ExpiredProviderToken burst: exactly one JWT refresh, then success"
    @Test func anExpiredProviderTokenBurstRefreshesOnce() async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        // The client's first token is expired from its first use, and the first flight
        // of streams goes out at once with it.
        let mock = try FaultMatrix.mock { $0.expireFirstProviderTokenAfter = 0; $0.initialStreams = 1000 }
        let client = try FaultMatrix.client(port: mock.port)
        let results = try await FaultMatrix.send(client, tokens)
        MatrixOutcome(tokens: tokens, results: results, mock: mock).checkInvariants()

        #expect(results.allSatisfy { $0.status == 200 && $0.attempts <= 2 })
        let stats = mock.statistics()
        #expect(stats.byReason["ExpiredProviderToken"].map { $0 > 1 } == true, "a burst: \(stats.byReason)")
        #expect(client.statistics.jwtSignatures == 2)
        #expect(stats.distinctJWTs == 2)
    }

    /// "TooManyProviderTokenUpdates: no further rotation on that connection; a fresh connection"
    @Test func tooManyProviderTokenUpdatesMovesToAFreshConnection() async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        // Mid-batch the first token runs out; its replacement comes minutes, not the
        // 20 APNs wants, after the connection took the first: that connection refuses it.
        let mock = try FaultMatrix.mock { $0.expireFirstProviderTokenAfter = 3000 }
        let client = try FaultMatrix.client(port: mock.port)
        let results = try await FaultMatrix.send(client, tokens)
        let outcome = MatrixOutcome(tokens: tokens, results: results, mock: mock)

        outcome.checkInvariants()
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        let stats = mock.statistics()
        #expect(stats.byReason["TooManyProviderTokenUpdates"].map { $0 >= 1 } == true, "\(stats.byReason)")
        #expect(client.statistics.jwtSignatures == 2 && stats.distinctJWTs == 2, "no rotation after the refusal")
        #expect(stats.connectionsAccepted == 2, "one fresh connection took the new token")
        let requests = outcome.requests.values.joined()
        let refusedOn = Set(requests.filter { $0.reason == "TooManyProviderTokenUpdates" }.map(\.connectionID))
        #expect(refusedOn == [1])
        let fresh = requests.filter { $0.connectionID != 1 }
        #expect(!fresh.isEmpty && fresh.allSatisfy { $0.status == 200 })
    }

    // MARK: - Stream limits and idle connections

    /// "SETTINGS max streams drops to 1, then rises: in-flight never exceeds the server's
    /// limit; throughput recovers"
    @Test func streamLimitDropsToOneThenRises() async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let mock = try FaultMatrix.mock {
            $0.settingsDrop = .init(after: 2000, to: 1, restoreAfter: 200)
            // Answers take a while, so that streams pile up whenever the limit allows.
            $0.latency = .milliseconds(1)
        }
        let client = try FaultMatrix.client(port: mock.port)
        let results = try await FaultMatrix.send(client, tokens)
        MatrixOutcome(tokens: tokens, results: results, mock: mock).checkInvariants()

        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        let stats = mock.statistics()
        #expect(stats.settingsSent >= 3, "raise, drop, restore")
        #expect(stats.streamsOverLimit == 0, "no stream above a limit the client acknowledged")
        #expect(stats.connectionsAccepted == 1 && client.statistics.connectionsLost == 0)
        #expect(stats.maxConcurrentStreamsRestored >= 50, "streams in flight after the restore: \(stats.maxConcurrentStreamsRestored)")
        #expect(client.statistics.serverMaxStreams == 1000)
    }

    enum Liveness: String, CaseIterable, Sendable {
        /// No PING in the idle time: the server closes the connection, the batch reconnects.
        case reconnect
        /// PINGs keep the connection; the server's first answer after idle is the 500 quirk.
        case ping
    }

    /// "idle connection for longer than the idle timeout, then a batch: PING liveness or
    /// reconnect; no 500-after-idle surprise"
    @Test(arguments: Liveness.allCases)
    func aBatchAfterIdleLongerThanTheServerAllows(_ liveness: Liveness) async throws {
        let tokens = Harness.tokens(FaultMatrix.size())
        let warmUp = Harness.tokens(10)
        // Timings with room for a loaded machine: a batch never pauses for 3 s, PINGs
        // every second stay far inside it (each ACK due within that second), the idle
        // wait outside it.
        let mock = try FaultMatrix.mock { $0.idleTimeout = .seconds(3); $0.idle500After = .seconds(3) }
        let client = try FaultMatrix.client(port: mock.port,
                                            pingInterval: liveness == .ping ? .seconds(1) : .seconds(30))
        _ = try await FaultMatrix.send(client, warmUp, shutdown: false)
        try await Task.sleep(for: .seconds(4))
        if liveness == .reconnect {
            // The server's GOAWAY is due at 3 s; a loaded machine may send or read it later,
            // and a batch sent before the client read it would meet the idle quirk.
            for _ in 0..<6_000 where client.statistics.goawaysReceived == 0 {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        let results = try await FaultMatrix.send(client, tokens)
        MatrixOutcome(tokens: tokens, results: results, mock: mock).checkInvariants()

        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        let stats = mock.statistics()
        switch liveness {
        case .reconnect:
            #expect(stats.goawaysSent == 1 && client.statistics.goawaysReceived == 1, "the server closed it")
            #expect(stats.connectionsAccepted == 2)
            #expect(stats.byStatus[500] == nil, "a fresh connection has no idle quirk")
        case .ping:
            #expect(stats.goawaysSent == 0 && stats.connectionsAccepted == 1, "PING kept the connection")
            #expect(stats.byStatus[500] == 1, "the quirk fired once, and was sent again")
        }
    }
}
