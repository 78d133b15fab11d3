import APNsMock
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import APNs

/// What every row of the fault matrix (FaultMatrixTests) shares: batch sizes, the
/// hang guard, and the four invariants of issue #5 checked against the mock's
/// own recording of every request it received and the answer it decided on.
enum FaultMatrix {
    /// `make soak` sets APNS_SOAK=1: every row runs ten times the tokens (and so ten
    /// times the GOAWAY and reset cycles).
    static let soak = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1"

    /// Tokens per row: 10,000, or ten times that under soak.
    static func size(_ normal: Int = 10_000) -> Int { soak ? normal * 10 : normal }

    /// A hang must fail the row, not stall the suite: the longest wait for the next
    /// result (or for the shutdown after the last). No row comes near it alone.
    static let deadline: Duration = soak ? .seconds(600) : .seconds(180)

    /// Holds every request of a soak row (a few attempts per token).
    static let recordCap = 2_000_000

    static func mock(_ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        try Harness.mock {
            $0.recordRequests = true
            $0.recordCap = recordCap
            tweak(&$0)
        }
    }

    static func client(port: UInt16, transport: Transport = .nghttp2, caFile: String? = TestPKI.shared.caFile,
                       requestTimeout: Duration = .seconds(60), pingInterval: Duration = .seconds(30),
                       retry: RetryPolicy = Harness.retry) throws -> APNsClient {
        let pki = TestPKI.shared
        let credentials = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        return try APNsClient(configuration: .init(
            credentials: credentials, environment: .custom(host: "127.0.0.1", port: Int(port)), caFile: caFile,
            transport: transport, connectTimeout: .seconds(2), requestTimeout: requestTimeout,
            pingInterval: pingInterval, retry: retry))
    }

    /// Sends one batch and shuts the client down, failing the test if no result
    /// comes for `deadline`: a stall, not a slow machine. A loaded machine (the
    /// whole suite on two cores) can take minutes over a 10,000-token row and still
    /// be making progress, so the guard watches results, not the total time. The
    /// race runs the send in a task of its own, so a send that never returns cannot
    /// hold the test (or the suite) hostage.
    static func send(_ client: APNsClient, _ tokens: [String], shutdown: Bool = true,
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> [DeliveryResult] {
        let finished = Race<[DeliveryResult]>()
        let progress = Progress()
        let sender = Task {
            var results: [DeliveryResult] = []
            results.reserveCapacity(tokens.count)
            for await result in client.send(Harness.notification(), to: tokens) {
                results.append(result)
                progress.step()
            }
            if shutdown { await client.shutdown() }
            finished.settle(results)
        }
        let watchdog = Task {
            var seen = -1
            while progress.count != seen {
                seen = progress.count
                try await Task.sleep(for: deadline)
            }
            finished.settle(nil)
        }
        let results = await finished.value
        watchdog.cancel()
        guard let results else {
            sender.cancel()
            Issue.record("no result for \(deadline), after \(progress.count) of \(tokens.count)",
                         sourceLocation: sourceLocation)
            throw CancellationError()
        }
        return results
    }

    /// Results seen so far, for the watchdog.
    final class Progress: Sendable {
        private let seen = Atomic<Int>(0)
        var count: Int { seen.load(ordering: .relaxed) }
        func step() { seen.add(1, ordering: .relaxed) }
    }
}

/// The first of several tasks to settle it wins; `value` waits for that.
final class Race<T: Sendable>: Sendable {
    private let state = Mutex<(settled: T??, waiter: CheckedContinuation<T?, Never>?)>((nil, nil))

    func settle(_ value: T?) {
        let waiter = state.withLock { s -> CheckedContinuation<T?, Never>? in
            guard s.settled == nil else { return nil }
            s.settled = .some(value)
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(returning: value)
    }

    var value: T? {
        get async {
            await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
                let ready = state.withLock { s -> T?? in
                    if s.settled == nil { s.waiter = c }
                    return s.settled
                }
                if let ready { c.resume(returning: ready) }
            }
        }
    }
}

/// One row's batch as the client reported it and as the mock saw it.
struct MatrixOutcome {
    let tokens: [String]
    let results: [DeliveryResult]
    /// The mock's records of this batch's tokens, each token's in arrival order.
    let requests: [String: [RecordedRequest]]
    /// Connections the mock reset: an answer decided on one may never have arrived.
    let resets: Set<UInt64>

    /// `mock` nil: no server ever saw a request (nothing listening, or no HTTP/2).
    init(tokens: [String], results: [DeliveryResult], mock: MockServer?) {
        self.tokens = tokens
        self.results = results
        let wanted = Set(tokens)
        var byToken: [String: [RecordedRequest]] = [:]
        for r in mock?.recordedRequests() ?? [] {
            guard let token = r.token, wanted.contains(token) else { continue }
            byToken[token, default: []].append(r)
        }
        requests = byToken.mapValues { $0.sorted { $0.received < $1.received } }
        resets = mock?.resetConnections() ?? []
    }


    /// The four invariants of issue #5, for every token of the batch:
    /// exactly one result per distinct token; the result is the mock's last answer
    /// for it (status 0 when none came); nothing was sent after a final answer; every
    /// attempt carried the same apns-id. Violations are reported a few at a time.
    /// `transport` .curl: libcurl sends a request again by itself when the connection
    /// it reused dies, which no attempt count of ours can see.
    func checkInvariants(_ transport: Transport = .nghttp2, sourceLocation: SourceLocation = #_sourceLocation) {
        let distinct = Set(tokens)
        #expect(results.count == distinct.count, "one result per distinct token", sourceLocation: sourceLocation)
        #expect(Set(results.map(\.token)) == distinct, "results for exactly the batch's tokens",
                sourceLocation: sourceLocation)
        var problems: [String] = []
        for result in results {
            problems += violations(result, requests[result.token] ?? [], countsAttempts: transport == .nghttp2)
            if problems.count >= 5 { break }
        }
        #expect(problems.count == 0, "\(problems.prefix(5).joined(separator: "\n"))", sourceLocation: sourceLocation)
    }

    private func violations(_ result: DeliveryResult, _ sent: [RecordedRequest], countsAttempts: Bool) -> [String] {
        var found: [String] = []
        let token = result.token.prefix(12)
        if countsAttempts && sent.count > result.attempts {
            found.append("\(token): \(sent.count) requests arrived, \(result.attempts) attempts reported")
        }
        if let id = result.apnsID, let other = sent.first(where: { $0.header("apns-id") != id }) {
            found.append("\(token): apns-id \(other.header("apns-id") ?? "none") besides \(id)")
        }
        // A final answer may be followed by another attempt only when the mock reset
        // the connection it was decided on: then it may never have left.
        for request in sent.dropLast() where isFinal(request) && !resets.contains(request.connectionID) {
            found.append("\(token): sent again after a final \(request.status) on connection \(request.connectionID) "
                         + "(\(sent.count) requests, \(result.attempts) attempts, result \(result.status))")
        }
        let last = sent.last
        if result.status != 0 {
            if last?.status != result.status || last?.reason != result.reason?.rawValue {
                found.append("\(token): result \(result.status) \(result.reason?.rawValue ?? "") but the mock's last "
                             + "answer was \(last.map { "\($0.status) \($0.reason ?? "")" } ?? "none")")
            }
        } else if let last, last.status != 0, !resets.contains(last.connectionID) {
            found.append("\(token): status 0 (\(result.error ?? "")) though the mock answered \(last.status)")
        }
        return found
    }

    private func isFinal(_ request: RecordedRequest) -> Bool {
        request.status != 0 && Disposition(status: request.status, reason: request.reason.map(Reason.init(rawValue:))) == .final
    }
}
