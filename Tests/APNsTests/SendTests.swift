import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// The library against the project's mock over real TLS on loopback, on both
/// transports. The mock verifies every provider JWT with OpenSSL, so a 200 here
/// also proves the signature.
@Suite struct SendTests {
    // MARK: - The happy path

    @Test(arguments: Transport.allCases)
    func aBatchGoesOverOneConnectionWithOneToken(transport: Transport) async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: transport)
        let tokens = Harness.tokens(3000)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 && $0.reason == nil })
        #expect(results.allSatisfy { $0.attempts == 1 } || transport == .curl)
        #expect(Set(results.compactMap(\.apnsID)).count == tokens.count)
        let stats = mock.statistics()
        #expect(stats.distinctJWTs == 1)
        #expect(client.statistics.jwtSignatures == 1)
        switch transport {
        case .nghttp2:
            #expect(stats.connectionsAccepted == 1)
            #expect(client.statistics.connectionsOpened == 1)
            #expect(stats.byStatus[200] == UInt64(tokens.count))
        case .curl:
            // libcurl 7.88 resets streams it has finished; nghttp2's rapid-reset guard
            // then drops the connection now and then. It must show, and lose nothing.
            #expect(client.statistics.connectionsOpened == 1 || client.statistics.connectionsLost > 0)
            #expect(stats.byStatus[200]! >= UInt64(tokens.count))
        }
    }

    /// APNS-PROTOCOL.md, "Request": the headers APNs requires, and nothing it rejects.
    @Test(arguments: Transport.allCases)
    func headersAreExactlyWhatAPNsWants(transport: Transport) async throws {
        let mock = try Harness.mock { $0.recordRequests = true; $0.sandbox = true }
        let client = try Harness.client(mock, transport: transport)
        let note = try Notification(topic: TestPKI.shared.topic, pushType: .alert, priority: .immediate,
                                    expiration: .at(unixSeconds: 1_900_000_000), collapseID: "order-1234",
                                    payload: Harness.payload)
        let token = Harness.tokens(1)[0]
        let result = try await client.send(note, to: token)
        await client.shutdown()

        #expect(result.status == 200)
        #expect(result.uniqueID != nil, "the development environment sends apns-unique-id")
        let request = try #require(mock.recordedRequests().first)
        #expect(request.method == "POST")
        #expect(request.path == "/3/device/\(token)")
        let names = request.headers.map { $0.0 }
        #expect(Set(names).subtracting(["content-length"]) == [
            "authorization", "apns-topic", "apns-push-type", "apns-id", "apns-priority", "apns-expiration",
            "apns-collapse-id",
        ])
        #expect(names.count == Set(names).count, "no header twice")
        #expect(request.header("apns-topic") == TestPKI.shared.topic)
        #expect(request.header("apns-push-type") == "alert")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-expiration") == "1900000000")
        #expect(request.header("apns-collapse-id") == "order-1234")
        #expect(request.header("apns-id") == result.apnsID)
        #expect(result.apnsID?.range(of: #"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"#,
                                     options: .regularExpression) != nil)
        #expect(request.header("authorization")?.hasPrefix("bearer ") == true)
        #expect(request.body == Harness.payload.bytes)
    }

    /// ARCHITECTURE.md: the payload is sent "after insignificant whitespace is removed
    /// (the payload is sent that way, key order and number spelling kept)".
    @Test func thePayloadIsTheFileWithoutItsWhiteSpace() async throws {
        let file = try #require(FileManager.default.contents(atPath: Package.fixture("examples/payloads/quote_approved.json")))
        let mock = try Harness.mock { $0.recordRequests = true }
        let client = try Harness.client(mock, transport: .curl)
        let note = try Notification(topic: TestPKI.shared.topic, payload: Payload(json: file))
        _ = try await client.send(note, to: Harness.tokens(1)[0])
        await client.shutdown()
        let body = try #require(mock.recordedRequests().first?.body)
        let expected = try JSONSerialization.jsonObject(with: file) as? NSDictionary
        #expect(try JSONSerialization.jsonObject(with: Data(body)) as? NSDictionary == expected)
        #expect(!body.contains(UInt8(ascii: "\n")) && body.count < file.count)
        #expect(String(decoding: body, as: UTF8.self).hasPrefix(#"{"aps":{"alert":{"title":"Quote Approved!","#))
        #expect(String(decoding: body, as: UTF8.self).contains("(£189.00)"))
    }

    // MARK: - Answers and retries

    /// "Never retry 400/403/404/405/410/413 for the same token."
    @Test(arguments: Transport.allCases)
    func finalAnswersAreNeverRetried(transport: Transport) async throws {
        let tokens = Harness.tokens(4)
        let mock = try Harness.mock {
            $0.unregistered = [tokens[0]: 1_700_000_000_000]
            $0.forced = [tokens[1]: .error(400, "BadDeviceToken"), tokens[2]: .error(403, "Forbidden"),
                         tokens[3]: .error(413, "PayloadTooLarge")]
        }
        let client = try Harness.client(mock, transport: transport)
        let results = Dictionary(uniqueKeysWithValues: await client.sendAll(Harness.notification(), to: tokens)
            .map { ($0.token, $0) })
        await client.shutdown()

        let gone = try #require(results[tokens[0]])
        #expect(gone.status == 410 && gone.reason == .unregistered && gone.timestamp == 1_700_000_000_000)
        #expect(results[tokens[1]]?.reason == .badDeviceToken && results[tokens[1]]?.status == 400)
        #expect(results[tokens[2]]?.reason == .forbidden)
        #expect(results[tokens[3]]?.status == 413)
        for token in tokens {
            #expect(results[token]?.attempts == 1)
            #expect(mock.attempts(for: token) == 1, "a final answer is never sent again")
        }
    }

    /// "Retry 429/500/503 ... with capped exponential backoff and jitter, the same apns-id on every attempt."
    @Test(arguments: Transport.allCases)
    func transientAnswersAreRetriedToSuccessWithTheSameID(transport: Transport) async throws {
        let token = Harness.tokens(1)[0]
        let mock = try Harness.mock {
            $0.recordRequests = true
            $0.scripted = [token: [.serviceUnavailable, .tooManyRequests, .internalServerError]]
        }
        let client = try Harness.client(mock, transport: transport)
        let start = ContinuousClock.now
        let result = try await client.send(Harness.notification(), to: token)
        let elapsed = ContinuousClock.now - start
        await client.shutdown()

        #expect(result.status == 200 && result.attempts == 4)
        #expect(mock.attempts(for: token) == 4)
        let ids = Set(mock.recordedRequests().compactMap { $0.header("apns-id") })
        #expect(ids == [result.apnsID!])
        // Three backoffs of at least half of 20, 40 and 80 ms.
        #expect(elapsed >= .milliseconds(70))
    }

    @Test func aTokenThatKeepsFailingEndsWithItsLastAnswer() async throws {
        let token = Harness.tokens(1)[0]
        let mock = try Harness.mock { $0.forced = [token: .serviceUnavailable] }
        let client = try Harness.client(mock, transport: .curl)
        let result = try await client.send(Harness.notification(), to: token)
        await client.shutdown()
        #expect(result.status == 503 && result.reason == .serviceUnavailable)
        #expect(result.attempts == Harness.retry.maxAttempts)
        #expect(mock.attempts(for: token) == Harness.retry.maxAttempts)
    }

    /// "On ExpiredProviderToken refresh once (a generation counter stops a burst of
    /// replies from causing a burst of refreshes), then send again."
    @Test(arguments: Transport.allCases)
    func aBurstOfExpiredProviderTokenAnswersRefreshesOnce(transport: Transport) async throws {
        let tokens = Harness.tokens(200)
        let mock = try Harness.mock {
            $0.scripted = Dictionary(uniqueKeysWithValues: tokens.map { ($0, [MockAnswer.error(403, "ExpiredProviderToken")]) })
            // A real expiry comes an hour after first use, long past APNs' 20-minute update limit.
            $0.tokenUpdateInterval = .zero
            // Every first attempt goes out at once, with the first provider token.
            $0.initialStreams = 1000
        }
        let client = try Harness.client(mock, transport: transport)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()
        #expect(results.count == tokens.count && results.allSatisfy { $0.status == 200 && $0.attempts == 2 },
                "\(results.filter { $0.status != 200 || $0.attempts != 2 }.prefix(3))")
        #expect(client.statistics.jwtSignatures == 2)
        #expect(mock.statistics().distinctJWTs == 2)
    }

    // MARK: - Connection faults

    /// "GOAWAY: streams with id <= last-stream-id are still answered; later ones were
    /// not processed and must be sent again on a new connection."
    @Test(arguments: Transport.allCases)
    func goawayMidBatchLosesAndDuplicatesNothing(transport: Transport) async throws {
        let mock = try Harness.mock { $0.goawayAfter = 500 }
        let client = try Harness.client(mock, transport: transport)
        let tokens = Harness.tokens(3000)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(2))")
        let stats = mock.statistics()
        if transport == .nghttp2 {
            #expect(stats.byStatus[200] == UInt64(tokens.count), "each token delivered exactly once")
        }
        #expect(stats.goawaysSent >= 5 && stats.connectionsAccepted >= 6)
    }

    @Test(arguments: Transport.allCases)
    func aConnectionResetMidBatchLosesNothing(transport: Transport) async throws {
        let mock = try Harness.mock { $0.resetAfter = 700 }
        let client = try Harness.client(mock, transport: transport)
        let tokens = Harness.tokens(2000)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()
        #expect(results.count == tokens.count && Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 }, "\(results.filter { $0.status != 200 }.prefix(3))")
        #expect(mock.statistics().resetsDone >= 2)
    }

    /// "The server's SETTINGS_MAX_CONCURRENT_STREAMS is the in-flight limit ... Honour every SETTINGS frame."
    @Test(arguments: Transport.allCases)
    func neverMoreStreamsThanTheServerAllows(transport: Transport) async throws {
        let mock = try Harness.mock { $0.maxStreams = 20; $0.latency = .milliseconds(2) }
        let client = try Harness.client(mock, transport: transport)
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(500))
        await client.shutdown()
        #expect(results.allSatisfy { $0.status == 200 })
        #expect(mock.statistics().maxConcurrentStreamsSeen <= 20)
    }

    @Test(arguments: Transport.allCases)
    func theWindowBoundsRequestsInFlight(transport: Transport) async throws {
        let mock = try Harness.mock { $0.latency = .milliseconds(5) }
        let client = try Harness.client(mock, transport: transport, maxInFlight: 8)
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(200))
        await client.shutdown()
        #expect(results.count == 200 && results.allSatisfy { $0.status == 200 })
        #expect(mock.statistics().maxConcurrentStreamsSeen <= 8)
    }

    // MARK: - No answer at all

    @Test(arguments: Transport.allCases)
    func anUnreachableEndpointGivesEveryTokenARecordNamingIt(transport: Transport) async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let client = try Harness.client(port: port, transport: transport)
        let tokens = Harness.tokens(50) + ["not-a-token"]
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()
        #expect(results.count == tokens.count)
        let unsent = results.filter { $0.token != "not-a-token" }
        #expect(unsent.allSatisfy { $0.status == 0 && $0.error?.contains("127.0.0.1:\(port)") == true },
                "\(unsent.first.map { String(describing: $0) } ?? "")")
        #expect(results.first { $0.token == "not-a-token" }?.reason == .badDeviceToken)
    }

    @Test(arguments: Transport.allCases)
    func aServerNotSignedByTheTrustedCAIsRefused(transport: Transport) async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(port: mock.port, transport: transport, caFile: nil)
        let result = try await client.send(Harness.notification(), to: Harness.tokens(1)[0])
        await client.shutdown()
        #expect(result.status == 0)
        #expect(result.error?.contains("127.0.0.1:\(mock.port)") == true)
        #expect(mock.statistics().requests == 0)
    }

    /// "Keep a deadline on every request so nothing waits forever."
    @Test(arguments: Transport.allCases)
    func aStalledServerHitsTheDeadline(transport: Transport) async throws {
        let mock = try Harness.mock { $0.stall = true }
        let client = try Harness.client(mock, transport: transport, requestTimeout: .milliseconds(300))
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(3))
        await client.shutdown()
        #expect(results.count == 3)
        #expect(results.allSatisfy { $0.status == 0 && $0.error != nil && $0.attempts == Harness.retry.maxAttempts })
    }

    @Test func malformedTokensGetALocalRecordAndAreNeverSent() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .curl)
        let good = Harness.tokens(2)
        let results = await client.sendAll(Harness.notification(), to: [good[0], "xyz", "  ", good[1]])
        await client.shutdown()
        #expect(results.count == 4)
        let bad = results.filter { $0.status == 0 }
        #expect(bad.count == 2 && bad.allSatisfy { $0.reason == .badDeviceToken && $0.attempts == 0 && $0.apnsID == nil })
        #expect(mock.statistics().streams == 2)
    }

    @Test func sendsAfterShutdownEndAtOnce() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .curl)
        await client.shutdown()
        await #expect(throws: APNsError.shutDown) { try await client.send(Harness.notification(), to: Harness.tokens(1)[0]) }
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(3))
        #expect(results.count == 3 && results.allSatisfy { $0.status == 0 })
        #expect(mock.statistics().streams == 0)
    }

    /// Back-pressure: a consumer that stops reading stops the reading of tokens.
    @Test func tokensAreReadOnlyAsResultsAreConsumed() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .curl, maxInFlight: 16)
        let pulled = Counter()
        let tokens = Harness.tokens(1000).lazy.map { token -> String in pulled.increment(); return token }
        var iterator = client.send(Harness.notification(), to: tokens).makeAsyncIterator()
        for _ in 0..<10 { _ = await iterator.next() }
        #expect(pulled.value <= 10 + 2 * 16)
        while await iterator.next() != nil {}
        #expect(pulled.value == 1000)
        await client.shutdown()
    }

    /// APNS-PROTOCOL.md: "SETTINGS_MAX_CONCURRENT_STREAMS is 1 until the first
    /// successful request with token auth". When every answer is an error it stays 1,
    /// and each request must still get its answer promptly on both transports (curl
    /// once started a stream parked for that one slot only at its next 1 s poll, so a
    /// batch of 200 ran out its request deadline and ended in status-0 records).
    @Test(arguments: [Transport.nghttp2, .curl])
    func oneStreamAtATimeStillAnswersEveryRequest(_ transport: Transport) async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: transport, requestTimeout: .seconds(20))
        let tokens = Harness.tokens(200)
        let elsewhere = try APNs.Notification(topic: "com.example.not-this-app", payload: Harness.payload)
        var results: [DeliveryResult] = []
        for await r in client.send(elsewhere, to: tokens) { results.append(r) }
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 400 }, "every request answered, none timed out")
        #expect(mock.statistics().maxConcurrentStreamsSeen <= 1)
    }
}

final class Counter: @unchecked Sendable {
    private var count = 0
    private let lock = NSLock()
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

enum Harness {
    static let retry = RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200))
    static let payload = try! Payload(json: #"{"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default"},"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid-here"}"#)

    static func notification() -> APNs.Notification {
        try! Notification(topic: TestPKI.shared.topic, payload: payload)
    }

    static func mock(_ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        let pki = TestPKI.shared
        var c = MockConfiguration(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey,
                                  authKeys: [pki.keyID: pki.keyPath], teamIDs: [pki.teamID], topics: [pki.topic])
        tweak(&c)
        return try MockServer(c)
    }

    static func client(_ mock: MockServer, transport: Transport, maxInFlight: Int = 1000,
                       requestTimeout: Duration = .seconds(10)) throws -> APNsClient {
        try client(port: mock.port, transport: transport, maxInFlight: maxInFlight, requestTimeout: requestTimeout)
    }

    static func client(port: UInt16, transport: Transport, caFile: String? = TestPKI.shared.caFile,
                       maxInFlight: Int = 1000, requestTimeout: Duration = .seconds(10),
                       connectTimeout: Duration = .seconds(20)) throws -> APNsClient {
        let pki = TestPKI.shared
        let credentials = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        return try APNsClient(configuration: .init(
            credentials: credentials, environment: .custom(host: "127.0.0.1", port: Int(port)), caFile: caFile,
            transport: transport, maxInFlight: maxInFlight, connectTimeout: connectTimeout,
            requestTimeout: requestTimeout, retry: retry))
    }

    /// Distinct random 64-digit tokens.
    static func tokens(_ n: Int) -> [String] {
        var seen = Set<String>()
        var rng = SystemRandomNumberGenerator()
        while seen.count < n {
            seen.insert((0..<4).map { _ in hexDigits(rng.next() as UInt64, count: 16) }.joined())
        }
        return Array(seen)
    }
}
