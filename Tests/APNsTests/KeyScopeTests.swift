import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// The engine against the mock's key rules: a provider key restricted to the other
/// environment is a configuration error that ends every send at once, and a
/// connection bound to another key is left for a fresh one.
@Suite struct KeyScopeEngineTests {
    let pki = TestPKI.shared

    /// The first answers come back 403 BadEnvironmentKeyIdInToken; every other send
    /// of the batch ends at once with the same answer and an error that says what to
    /// fix, and nothing is sent twice. One request in flight at a time (the lane holds
    /// two): without the reaction all 50 would go out, each to fail on its own.
    @Test(arguments: Transport.allCases)
    func aKeyForTheOtherEnvironmentFailsFastWithOneClearError(transport: Transport) async throws {
        let mock = try Harness.mock {
            $0.keyEnvironments[TestPKI.shared.keyID] = .sandbox   // the mock serves production
            $0.recordRequests = true
        }
        let client = try Harness.client(mock, transport: transport, maxInFlight: 1)
        let tokens = Harness.tokens(50)
        let results = await client.sendAll(Harness.notification(), to: tokens)

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 403 && $0.reason == .badEnvironmentKeyIdInToken },
                "\(results.filter { $0.reason != .badEnvironmentKeyIdInToken }.prefix(2))")
        #expect(results.allSatisfy { $0.attempts <= 1 }, "nothing is retried")
        for result in results {
            let error = try #require(result.error)
            #expect(error.contains(pki.keyID) && error.contains("127.0.0.1:\(mock.port)"), "\(error)")
        }
        // What the lane had already handed to the transport still leaves (two here, a
        // few more when a loaded machine reads the first answer late); without the
        // reaction all 50 go out, each to fail on its own.
        let recorded = mock.recordedRequests()
        #expect(recorded.count < 10, "\(recorded.count) requests: each token went out on its own")
        #expect(Set(recorded.map(\.path)).count == recorded.count, "a token was sent twice")

        // A later send ends at once, never sent.
        let late = try await client.send(Harness.notification(), to: Harness.tokens(1)[0])
        #expect(late.status == 403 && late.reason == .badEnvironmentKeyIdInToken && late.attempts == 0)
        #expect(late.error == results[0].error)
        #expect(mock.recordedRequests().count == recorded.count)
        await client.shutdown()
    }

    /// A key for this environment, or for both, is not affected.
    @Test func aKeyForThisEnvironmentIsAccepted() async throws {
        let mock = try Harness.mock { $0.keyEnvironments[TestPKI.shared.keyID] = .production }
        let client = try Harness.client(mock, transport: .nghttp2)
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(20))
        await client.shutdown()
        #expect(results.allSatisfy { $0.status == 200 && $0.error == nil })
    }

    /// 403 UnrelatedKeyIdInToken: the connection belongs to another key. The answering
    /// connection is retired and the send goes again, once, on a fresh one.
    @Test func anUnrelatedKeyIsResentOnceOnAFreshConnection() async throws {
        let token = Harness.tokens(1)[0]
        let mock = try Harness.mock {
            $0.recordRequests = true
            $0.scripted[token] = [.error(403, "UnrelatedKeyIdInToken")]
        }
        let client = try Harness.client(mock, transport: .nghttp2)
        let result = try await client.send(Harness.notification(), to: token)
        await client.shutdown()

        #expect(result.status == 200)
        #expect(result.attempts == 2)
        let sent = mock.recordedRequests().filter { $0.path == "/3/device/\(token)" }
        #expect(sent.map(\.status) == [403, 200])
        #expect(Set(sent.map(\.connectionID)).count == 2, "the resend went on a fresh connection")
    }

    /// ...and a second such answer is final: the trouble is the key, not the connection.
    @Test func anUnrelatedKeyIsResentOnlyOnce() async throws {
        let token = Harness.tokens(1)[0]
        let mock = try Harness.mock {
            $0.forced[token] = .error(403, "UnrelatedKeyIdInToken")
        }
        let client = try Harness.client(mock, transport: .nghttp2)
        let result = try await client.send(Harness.notification(), to: token)
        await client.shutdown()

        #expect(result.status == 403 && result.reason == .unrelatedKeyIdInToken)
        #expect(result.attempts == 2)
        #expect(mock.attempts(for: token) == 2)
    }
}
