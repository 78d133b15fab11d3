import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

/// The nghttp2 transport (CAPNS_TRANSPORT_NGHTTP2) through the C API, against real
/// local servers: nghttpd (HTTP/2 over TLS), openssl s_server (HTTP/1 only, or h2 by
/// ALPN but silent), a listener that never answers, a closed port.
/// Then against the C mock APNs server (CAPNsMock) for real APNs answers and faults:
/// GOAWAY, connection resets, a stream limit that drops at runtime.
/// Shares ServerProcess, SilentListener, freePort and offPool with the curl transport tests.
@Suite(.serialized) struct H2TransportTests {
    @Test func aBatchOf20000CompletesExactlyOnceOverOneConnection() async throws {
        let server = try H2Servers.nghttpd(maxStreams: 1000)
        let sender = try H2Sender(port: server.port, maxOutstanding: 4000)
        let count = 20_000

        await sender.submit(count: count)
        await sender.collector.wait(for: count, seconds: 120)
        let stats = sender.stats
        await sender.destroy()
        _ = server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)) == Set((0..<count).map(UInt64.init)))
        // nghttpd answers 404 (no such file): a real HTTP/2 answer to every POST.
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 404 })
        #expect(stats.connections_opened == 1)
        #expect(stats.connections_lost == 0)
        #expect(stats.requests_started == UInt64(count))
        #expect(stats.completed == UInt64(count))
        #expect(stats.server_max_streams == 1000)
        #expect(stats.peak_streams > 1 && stats.peak_streams <= 1000)
    }

    @Test func requestsCarryTheAPNsHeadersAndNoStreamIsReset() async throws {
        let server = try H2Servers.nghttpd(maxStreams: 100, verbose: true)
        let sender = try H2Sender(port: server.port)
        let count = 1500

        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        await sender.destroy()
        let log = server.stop()

        #expect(sender.collector.completions.count == count)
        // Rapid-reset protection drops a connection after ~1000 resets: send none.
        #expect(log.components(separatedBy: "recv RST_STREAM").count - 1 == 0)
        #expect(log.contains(":method: POST"))
        #expect(log.contains(":path: /3/device/\(H2Sender.token(7))"))
        #expect(log.contains(":authority: 127.0.0.1:\(server.port)"))
        #expect(log.contains("authorization: bearer test.jwt.only"))
        #expect(log.contains("apns-topic: com.example.app"))
        #expect(log.contains("apns-push-type: alert"))
        #expect(log.contains("apns-priority: 10"))
        #expect(log.contains("apns-id: \(H2Sender.apnsID(7))"))
        #expect(log.contains("content-length: 25"))
        #expect(!log.contains("apns-expiration") && !log.contains("apns-collapse-id"))
        #expect(log.contains("ENABLE_PUSH(0x02):0"))
    }

    @Test func optionalHeadersAndANewProviderTokenAreSent() async throws {
        let server = try H2Servers.nghttpd(maxStreams: 100, verbose: true)
        let sender = try H2Sender(port: server.port, expiration: 0, collapseID: "order-42")
        await sender.submit(count: 10)
        await sender.collector.wait(for: 10)
        sender.setProviderToken("second.jwt.only")
        await sender.submit(count: 10)
        await sender.collector.wait(for: 20)
        await sender.destroy()
        let log = server.stop()

        #expect(sender.collector.completions.count == 20)
        #expect(log.contains("apns-expiration: 0"))
        #expect(log.contains("apns-collapse-id: order-42"))
        #expect(log.contains("authorization: bearer test.jwt.only"))
        #expect(log.contains("authorization: bearer second.jwt.only"))
    }

    @Test func theServersStreamLimitIsHonoured() async throws {
        let server = try H2Servers.nghttpd(maxStreams: 7)
        let sender = try H2Sender(port: server.port, maxOutstanding: 500)
        let count = 2000

        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        _ = server.stop()

        #expect(sender.collector.completions.filter { $0.outcome == CAPNS_ANSWERED }.count == count)
        #expect(stats.server_max_streams == 7)
        #expect(stats.peak_streams == 7)
    }

    @Test func requestsAreSpreadOverSeveralConnections() async throws {
        let server = try H2Servers.nghttpd(maxStreams: 50)
        let sender = try H2Sender(port: server.port, connections: 3, maxOutstanding: 600)
        let count = 6000

        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        _ = server.stop()

        let completions = sender.collector.completions
        #expect(Set(completions.map(\.tag)).count == count)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED })
        #expect(stats.connections_opened == 3)
        #expect(stats.peak_streams <= 50)
    }

    @Test func anUntrustedCertificateFailsToConnectNamingTheEndpoint() async throws {
        let otherCA = try H2Servers.unrelatedCA()
        let server = try H2Servers.nghttpd(maxStreams: 100)
        let sender = try H2Sender(port: server.port, caFile: otherCA)
        await sender.submit(count: 3)
        await sender.collector.wait(for: 3)
        await sender.destroy()
        _ = server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == 3)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(server.port): TLS: certificate verify failed (unable to get local issuer certificate)")
        }
    }

    @Test func theCertificateMustNameTheHost() async throws {
        // Signed by the trusted test CA, but for another name than 127.0.0.1 / localhost.
        let (key, cert) = try H2Servers.certificate(subjectAltName: "DNS:other.example")
        let wrongName = try H2Servers.nghttpd(maxStreams: 100, key: key, certificate: cert)
        let server = try H2Servers.nghttpd(maxStreams: 100)
        let byName = try H2Sender(host: "localhost", port: server.port)
        let mismatched = try H2Sender(port: wrongName.port)
        await byName.submit(count: 2)
        await mismatched.submit(count: 2)
        await byName.collector.wait(for: 2)
        await mismatched.collector.wait(for: 2)
        await byName.destroy()
        await mismatched.destroy()
        _ = server.stop()
        _ = wrongName.stop()

        #expect(byName.collector.completions.count == 2)
        #expect(byName.collector.completions.allSatisfy { $0.outcome == CAPNS_ANSWERED })
        let failed = mismatched.collector.completions
        #expect(failed.count == 2)
        for c in failed {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(wrongName.port): TLS: certificate verify failed (IP address mismatch)")
        }
    }

    @Test func aClosedPortFailsToConnect() async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let sender = try H2Sender(port: port)
        await sender.submit(count: 2)
        await sender.collector.wait(for: 2)
        await sender.destroy()

        let completions = sender.collector.completions
        #expect(completions.count == 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(port): connect: Connection refused")
        }
    }

    @Test func aServerWithoutHTTP2FailsWithTheALPNError() async throws {
        let server = try H2Servers.http1Only(alpn: "http/1.1")
        let sender = try H2Sender(port: server.port)
        await sender.submit(count: 2)
        await sender.collector.wait(for: 2)
        await sender.destroy()
        _ = server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(server.port): server did not negotiate HTTP/2 (ALPN)")
        }
    }

    @Test func aHandshakeThatNeverEndsHitsTheConnectTimeout() async throws {
        let listener = SilentListener()
        let sender = try H2Sender(port: listener.port, connectTimeoutMs: 300)
        await sender.submit(count: 2)
        await sender.collector.wait(for: 2, seconds: 10)
        await sender.destroy()

        let completions = sender.collector.completions
        #expect(completions.count == 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(listener.port): connect timed out after 300 ms")
        }
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        let server = try SilentH2Server()
        let sender = try H2Sender(port: server.port, requestTimeoutMs: 300)
        await sender.submit(count: 5)
        await sender.collector.wait(for: 5, seconds: 10)
        let stats = sender.stats
        await sender.destroy()
        server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == 5)
        #expect(Set(completions.map(\.tag)).count == 5)
        for c in completions {
            #expect(c.outcome == CAPNS_TIMED_OUT)
            #expect(c.error.hasPrefix("127.0.0.1:\(server.port): no answer within 300 ms"), "\(c.error)")
        }
        // No SETTINGS from this server: only the one stream APNs allows at first was opened.
        #expect(stats.requests_started == 1)
        #expect(stats.timed_out == 5)
    }

    @Test func anUnansweredPingClosesTheConnection() async throws {
        let server = try SilentH2Server()
        let sender = try H2Sender(port: server.port, requestTimeoutMs: 30_000, pingIntervalMs: 200)
        await sender.submit(count: 3)
        await sender.collector.wait(for: 3, seconds: 10)
        let stats = sender.stats
        await sender.destroy()
        server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == 3)
        // The one stream in flight was lost with the connection; the two waiting for a
        // stream fail with it, as this connection never gave an answer.
        let lost = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(lost.count == 1)
        #expect(lost.first?.error == "127.0.0.1:\(server.port): connection lost: PING not acknowledged within 200 ms")
        #expect(completions.filter { $0.outcome == CAPNS_CONNECT_FAILED }.count == 2)
        #expect(stats.connections_lost == 1)
    }

    @Test func destroyingWithWorkInFlightCancelsEachRequestOnce() async throws {
        let server = try SilentH2Server()
        let sender = try H2Sender(port: server.port, requestTimeoutMs: 60_000)
        let count = 300
        await sender.submit(count: count)
        for _ in 0..<200 where sender.stats.requests_started == 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(sender.stats.requests_started == 1)
        await sender.destroy()
        server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_CANCELLED })
    }

    // MARK: against the mock APNs server

    @Test func theMockAnswersWithAPNsStatusesReasonsAndIDs() async throws {
        let unregistered = H2Sender.token(3)
        let mock = try H2Mock(unregistered: [unregistered: 1_700_000_000_000])
        let sender = try H2Sender(port: mock.port, topic: TestPKI.shared.topic,
                                  providerToken: try H2Mock.providerToken())
        let count = 3000
        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        let served = await mock.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        for c in completions where c.tag != 3 {
            #expect(c.outcome == CAPNS_ANSWERED && c.status == 200 && c.reason.isEmpty)
            #expect(c.apnsID == H2Sender.apnsID(Int(c.tag)))
        }
        let gone = try #require(completions.first { $0.tag == 3 })
        #expect(gone.status == 410 && gone.reason == "Unregistered" && gone.timestampMs == 1_700_000_000_000)
        #expect(gone.apnsID == H2Sender.apnsID(3))
        // One stream until the first success, then the mock's 1000.
        #expect(stats.server_max_streams == 1000)
        #expect(stats.peak_streams > 1 && stats.peak_streams <= 1000)
        #expect(served.max_streams_seen <= 1000)
        #expect(served.connections_accepted == 1)
    }

    @Test func aGoawayEndsLaterStreamsNotProcessedAndANewConnectionTakesOver() async throws {
        let mock = try H2Mock { $0.goaway_after = 500 }
        let sender = try H2Sender(port: mock.port, maxOutstanding: 2000, topic: TestPKI.shared.topic,
                                  providerToken: try H2Mock.providerToken())
        let count = 1800
        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        _ = await mock.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        let refused = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED || $0.outcome == CAPNS_NOT_PROCESSED })
        #expect(!refused.isEmpty)
        #expect(refused.allSatisfy { $0.error.contains("above GOAWAY last-stream-id") }, "\(refused.first?.error ?? "")")
        #expect(stats.goaways_received >= 1)
        #expect(stats.connections_opened >= 2)
        #expect(stats.connections_lost == 0)
    }

    @Test func aResetConnectionEndsItsStreamsNotProcessedAndPendingMovesOn() async throws {
        let mock = try H2Mock { $0.reset_after = 300 }
        // More requests than the sender holds: some still wait in its queue at the reset.
        let sender = try H2Sender(port: mock.port, maxOutstanding: 2000, topic: TestPKI.shared.topic,
                                  providerToken: try H2Mock.providerToken())
        let count = 3000
        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        _ = await mock.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        let lost = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(!lost.isEmpty)
        #expect(lost.allSatisfy { $0.error.contains("connection lost") }, "\(lost.first?.error ?? "")")
        #expect(completions.filter { $0.outcome == CAPNS_ANSWERED }.count + lost.count == count)
        #expect(stats.connections_lost >= 1)
        #expect(stats.connections_opened >= 2)
    }

    @Test func aStreamLimitThatDropsAtRuntimeIsFollowed() async throws {
        let mock = try H2Mock {
            $0.settings_drop_after = 200
            $0.settings_drop_to = 2
        }
        let sender = try H2Sender(port: mock.port, topic: TestPKI.shared.topic,
                                  providerToken: try H2Mock.providerToken())
        let count = 1500
        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        _ = await mock.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        #expect(stats.server_max_streams == 2)
        // Streams sent before the SETTINGS arrived may be refused; afterwards none are.
        let refused = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }.count
        #expect(completions.filter { $0.outcome == CAPNS_ANSWERED && $0.status == 200 }.count + refused == count)
        #expect(refused < 1000)
    }
}

// MARK: - helpers for these tests

/// One completion with everything the nghttp2 tests look at.
struct H2Completion: Sendable {
    let tag: UInt64
    let outcome: capns_outcome
    let status: Int32
    let timestampMs: Int64
    let apnsID: String
    let reason: String
    let error: String
}

/// Collects completions from the sender thread; tests await a count of them.
final class H2Collector: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [H2Completion] = []

    var completions: [H2Completion] { lock.withLock { items } }

    func add(_ batch: UnsafePointer<capns_completion>, _ count: Int) {
        let received = (0..<count).map { i -> H2Completion in
            var c = batch[i]
            return H2Completion(tag: c.tag, outcome: capns_outcome(UInt32(c.outcome)), status: c.status,
                                timestampMs: c.timestamp_ms, apnsID: cField(&c.apns_id),
                                reason: cField(&c.reason), error: cField(&c.error))
        }
        lock.withLock { items += received }
    }

    /// Waits until `count` completions arrived or `seconds` passed (the test then sees fewer).
    func wait(for count: Int, seconds: Double = 60) async {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while lock.withLock({ items.count }) < count && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }
}

/// A fixed-size C char array (imported as a tuple) as a String.
private func cField<T>(_ field: inout T) -> String {
    withUnsafeBytes(of: &field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}

/// A capns_sender on the nghttp2 transport. Request `tag` goes to token(tag) with apnsID(tag).
final class H2Sender: @unchecked Sendable {
    let collector: H2Collector
    private let sender: OpaquePointer
    private let message: OpaquePointer
    private var destroyed = false

    init(host: String = "127.0.0.1", port: UInt16, caFile: String? = TestPKI.shared.caFile,
         connections: Int32 = 1, maxOutstanding: Int32 = 1000, connectTimeoutMs: Int32 = 5000,
         requestTimeoutMs: Int32 = 20000, pingIntervalMs: Int32 = 0, topic: String = "com.example.app",
         providerToken: String = "test.jwt.only", expiration: Int64 = -1, collapseID: String? = nil) throws {
        let collector = H2Collector()
        self.collector = collector
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let created: OpaquePointer? = host.withCString { host in
            withOptionalCString(caFile) { ca in
                var cfg = capns_sender_config()
                cfg.transport = CAPNS_TRANSPORT_NGHTTP2
                cfg.host = host
                cfg.port = port
                cfg.ca_file = ca
                cfg.connections = connections
                cfg.max_outstanding = maxOutstanding
                cfg.connect_timeout_ms = connectTimeoutMs
                cfg.request_timeout_ms = requestTimeoutMs
                cfg.ping_interval_ms = pingIntervalMs
                cfg.on_complete = h2OnComplete
                cfg.ctx = Unmanaged.passUnretained(collector).toOpaque()
                return capns_sender_create(&cfg, &err, err.count)
            }
        }
        guard let created else { throw HarnessError(message: text(err)) }
        sender = created
        capns_sender_set_authorization(sender, providerToken)
        let payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        message = payload.withUnsafeBufferPointer { bytes in
            topic.withCString { topic in
                "alert".withCString { pushType in
                    withOptionalCString(collapseID) { collapseID in
                        var spec = capns_message_spec()
                        spec.topic = topic
                        spec.push_type = pushType
                        spec.priority = 10
                        spec.expiration = expiration
                        spec.collapse_id = collapseID
                        spec.payload = bytes.baseAddress
                        spec.payload_len = bytes.count
                        return capns_message_create(&spec)!
                    }
                }
            }
        }
    }

    static func token(_ tag: Int) -> String { String(format: "%064x", tag) }
    static func apnsID(_ tag: Int) -> String { String(format: "00000000-0000-4000-8000-%012x", tag) }

    /// Submits tags 0..<count in batches, waiting for room while the queue is full (off the pool).
    func submit(count: Int) async {
        await offPool { [self] in
            var next = 0
            while next < count {
                let batch = (next..<min(count, next + 256)).map { tag in
                    (tag, strdup(Self.token(tag))!, strdup(Self.apnsID(tag))!)
                }
                defer { batch.forEach { free($0.1); free($0.2) } }
                var requests = batch.map { tag, token, id in
                    capns_request(tag: UInt64(tag), message: message, token: token, apns_id: id)
                }
                var done = 0
                while done < requests.count {
                    let taken = requests[done...].withUnsafeMutableBufferPointer {
                        capns_sender_submit(sender, $0.baseAddress, $0.count)
                    }
                    done += taken
                    if done < requests.count { usleep(500) }
                }
                next += requests.count
            }
        }
    }

    func setProviderToken(_ jwt: String) {
        capns_sender_set_authorization(sender, jwt)
    }

    var stats: capns_sender_stats {
        var s = capns_sender_stats()
        capns_sender_get_stats(sender, &s)
        return s
    }

    /// Stops the sender; blocks on its thread, so it runs off the cooperative pool.
    func destroy() async {
        guard !destroyed else { return }
        destroyed = true
        await offPool { [self] in capns_sender_destroy(sender) }
    }

    deinit {
        if !destroyed { capns_sender_destroy(sender) }
        capns_message_release(message)
    }
}

private let h2OnComplete: capns_completion_fn = { ctx, batch, count in
    Unmanaged<H2Collector>.fromOpaque(ctx!).takeUnretainedValue().add(batch!, count)
}

enum H2Servers {
    /// nghttpd with the given SETTINGS_MAX_CONCURRENT_STREAMS; `verbose` logs every frame.
    static func nghttpd(maxStreams: Int, verbose: Bool = false, key: String = TestPKI.shared.serverKey,
                        certificate: String = TestPKI.shared.serverCertificate) throws -> ServerProcess {
        let port = freePort()
        let docroot = FileManager.default.temporaryDirectory.appendingPathComponent("capns-h2-www")
        try FileManager.default.createDirectory(at: docroot, withIntermediateDirectories: true)
        return try ServerProcess("/usr/sbin/nghttpd",
                                 (verbose ? ["-v"] : []) +
                                 ["--address=127.0.0.1", "--max-concurrent-streams=\(maxStreams)",
                                  "-d", docroot.path, "\(port)", key, certificate],
                                 port: port)
    }

    /// openssl s_server -www with ALPN `alpn`: TLS with a valid certificate, HTTP/1 only.
    static func http1Only(alpn: String) throws -> ServerProcess {
        let pki = TestPKI.shared, port = freePort()
        return try ServerProcess("/usr/bin/openssl",
                                 ["s_server", "-quiet", "-www", "-alpn", alpn, "-accept", "127.0.0.1:\(port)",
                                  "-cert", pki.serverCertificate, "-key", pki.serverKey], port: port)
    }

    /// A key and certificate signed by the test CA for `subjectAltName` only.
    static func certificate(subjectAltName: String) throws -> (key: String, certificate: String) {
        let pki = TestPKI.shared
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("capns-h2-\(UUID())").path
        let made = runSync("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=other", "-addext", "subjectAltName=\(subjectAltName)",
            "-CA", pki.caFile, "-CAkey", pki.directory.appendingPathComponent("ca.key").path,
            "-keyout", base + ".key", "-out", base + ".crt"])
        guard made.status == 0 else { throw HarnessError(message: "openssl req: \(made.stderr)") }
        return (base + ".key", base + ".crt")
    }

    /// A CA certificate that did not sign the server's certificate.
    static func unrelatedCA() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("capns-h2-other-ca-\(UUID()).pem").path
        let made = runSync("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                "-nodes", "-days", "1", "-subj", "/CN=not the test CA",
                                                "-keyout", "/dev/null", "-out", path])
        guard made.status == 0 else { throw HarnessError(message: "openssl req: \(made.stderr)") }
        return path
    }
}

/// openssl s_server offering ALPN h2: it completes the TLS handshake, then reads and
/// never answers (no SETTINGS either). Its stdin stays open: at end of input it would quit.
final class SilentH2Server: @unchecked Sendable {
    let port = freePort()
    private let process = Process()
    private let input = Pipe()

    init() throws {
        let pki = TestPKI.shared
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-quiet", "-alpn", "h2", "-accept", "127.0.0.1:\(port)",
                             "-cert", pki.serverCertificate, "-key", pki.serverKey]
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 where !canConnect(port) && process.isRunning {
            usleep(20_000)
        }
    }

    /// SIGKILL: a child spawned from a Dispatch thread may have SIGTERM blocked.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? input.fileHandleForWriting.close()
    }

    deinit { stop() }
}

/// The C mock APNs server on 127.0.0.1 (any free port), trusting TestPKI's provider key
/// and team for TestPKI's topic; `configure` sets its faults.
final class H2Mock: @unchecked Sendable {
    let port: UInt16
    private let mock: OpaquePointer
    private var stopped = false

    init(unregistered: [String: Int64] = [:], configure: (inout capns_mock_config) -> Void = { _ in }) throws {
        let pki = TestPKI.shared
        var owned: [UnsafeMutablePointer<CChar>] = []
        defer { owned.forEach { free($0) } }
        func c(_ s: String) -> UnsafePointer<CChar> {
            let p = strdup(s)!
            owned.append(p)
            return UnsafePointer(p)
        }
        var keys = [capns_mock_auth_key(key_id: c(pki.keyID), path: c(pki.keyPath))]
        var teams: [UnsafePointer<CChar>?] = [c(pki.teamID)]
        var topics: [UnsafePointer<CChar>?] = [c(pki.topic)]
        var cfg = capns_mock_config()
        cfg.cert_file = c(pki.serverCertificate)
        cfg.key_file = c(pki.serverKey)
        cfg.max_streams = 1000
        configure(&cfg)
        var err = [CChar](repeating: 0, count: Int(CAPNS_MOCK_ERR_MAX))
        let created = keys.withUnsafeMutableBufferPointer { k in
            teams.withUnsafeMutableBufferPointer { t in
                topics.withUnsafeMutableBufferPointer { p in
                    cfg.auth_keys = UnsafePointer(k.baseAddress)
                    cfg.n_auth_keys = 1
                    cfg.teams = UnsafePointer(t.baseAddress)
                    cfg.n_teams = 1
                    cfg.topics = UnsafePointer(p.baseAddress)
                    cfg.n_topics = 1
                    return capns_mock_create(&cfg, &err, err.count)
                }
            }
        }
        guard let created else { throw HarnessError(message: text(err)) }
        for (token, timestamp) in unregistered {
            _ = capns_mock_add_unregistered(created, token, timestamp)
        }
        guard capns_mock_start(created, &err, err.count) == 0 else {
            capns_mock_destroy(created)
            throw HarnessError(message: text(err))
        }
        mock = created
        port = capns_mock_port(created)
    }

    /// Stops the mock (joins its threads, off the pool) and returns its final statistics.
    func stop() async -> capns_mock_stats {
        guard !stopped else { return capns_mock_stats() }
        stopped = true
        return await offPool { [self] in
            var stats = capns_mock_stats()
            capns_mock_get_stats(mock, &stats)
            capns_mock_destroy(mock)
            return stats
        }
    }

    deinit { if !stopped { capns_mock_destroy(mock) } }

    /// A fresh ES256 provider token for TestPKI's key and team.
    static func providerToken() throws -> String {
        let pki = TestPKI.shared
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        guard let key = capns_key_load_file(pki.keyPath, &err, err.count) else {
            throw HarnessError(message: text(err))
        }
        defer { capns_key_free(key) }
        var out = [CChar](repeating: 0, count: Int(CAPNS_JWT_MAX))
        let iat = Int64(Date().timeIntervalSince1970)
        guard capns_jwt_sign(key, pki.keyID, pki.teamID, iat, &out, out.count, &err, err.count) > 0 else {
            throw HarnessError(message: text(err))
        }
        return text(out)
    }
}
