import CAPNs
import Foundation
import Testing
import TestSupport

/// What both transports must do alike, each test run once per transport against the same
/// real local servers: the APNs request on the wire, the mock's APNs answers read back,
/// the server certificate checked by CA and by name, and every failure to get an answer
/// ending each request exactly once. The nghttp2 transport's error texts are its own
/// (libcurl's vary by version): its cases check them in full.
@Suite(.serialized) struct TransportSharedTests {
    @Test(arguments: Transport.allCases)
    func requestsCarryTheAPNsHeadersAndNoStreamIsReset(_ transport: Transport) async throws {
        let server = try ServerProcess.nghttpd(maxStreams: 100, verbose: true)
        // A request's deadline is a hang guard here: one that passes makes the sender reset
        // its stream, and this test counts resets. A verbose nghttpd on a loaded machine may
        // take minutes over 1,500 requests.
        let sender = try TestSender(transport, port: server.port, requestTimeoutMs: 300_000)
        let count = 1500

        let (completions, _) = await sender.run(count: count, seconds: 300)
        let log = server.stop()

        expectEachTagOnce(completions, count)
        // Rapid-reset protection drops a connection after ~1000 resets: send none.
        #expect(log.components(separatedBy: "recv RST_STREAM").count - 1 == 0)
        // Only the headers APNs wants: nothing curl adds by default (accept, content-type, expect).
        #expect(requestHeaderNames(in: log) == [":method", ":path", ":scheme", ":authority", "authorization",
                                                "apns-id", "apns-topic", "apns-push-type", "apns-priority",
                                                "content-length"])
        #expect(log.contains(":method: POST"))
        #expect(log.contains(":path: /3/device/\(TestSender.token(7))"))
        #expect(log.contains(":authority: 127.0.0.1:\(server.port)"))
        #expect(log.contains("authorization: bearer test.jwt.only"))
        #expect(log.contains("apns-topic: com.example.app"))
        #expect(log.contains("apns-push-type: alert"))
        #expect(log.contains("apns-priority: 10"))
        #expect(log.contains("apns-id: \(TestSender.apnsID(7))"))
        #expect(log.contains("content-length: 25"))
        #expect(!log.contains("apns-expiration") && !log.contains("apns-collapse-id"))
        #expect(log.contains("ENABLE_PUSH(0x02):0"))
    }

    @Test(arguments: Transport.allCases)
    func optionalHeadersAndANewProviderTokenAreSent(_ transport: Transport) async throws {
        let server = try ServerProcess.nghttpd(maxStreams: 100, verbose: true)
        let sender = try TestSender(transport, port: server.port, expiration: 0, collapseID: "order-42")
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

    @Test(arguments: Transport.allCases)
    func theMockAnswersWithAPNsStatusesReasonsAndIDs(_ transport: Transport) async throws {
        let mock = try InProcessMock(unregistered: [TestSender.token(3): 1_700_000_000_000])
        let count = 3000
        let (completions, stats) = try await TestSender(transport, mock: mock).run(count: count)
        let served = await mock.stop()

        expectEachTagOnce(completions, count)
        let answered = completions.filter { $0.outcome == CAPNS_ANSWERED }
        for c in answered where c.tag != 3 {
            #expect(c.status == 200 && c.reason.isEmpty, "\(c.status) \(c.reason)")
            #expect(c.apnsID == TestSender.apnsID(Int(c.tag)))
        }
        let gone = try #require(completions.first { $0.tag == 3 })
        #expect(gone.status == 410 && gone.reason == "Unregistered" && gone.timestampMs == 1_700_000_000_000)
        #expect(gone.apnsID == TestSender.apnsID(3))
        #expect(served.max_streams_seen <= 1000)
        // A request without an answer was lost with its connection: the library sends it again.
        let lost = completions.filter { $0.outcome != CAPNS_ANSWERED }
        #expect(lost.allSatisfy { $0.outcome == CAPNS_NOT_PROCESSED }, "\(lost.first?.error ?? "")")
        expectUnlessCurlChurn(transport) {
            #expect(lost.isEmpty, "\(lost.count) lost, first: \(lost.first?.error ?? "")")
            #expect(served.connections_accepted == 1)
        }
        if transport == .nghttp2 {
            // One stream until the first success, then the mock's 1000.
            #expect(stats.server_max_streams == 1000)
            #expect(stats.peak_streams > 1 && stats.peak_streams <= 1000)
        }
    }

    @Test(arguments: Transport.allCases)
    func theCertificateMustNameTheHost(_ transport: Transport) async throws {
        // Signed by the trusted test CA, but for another name than 127.0.0.1 / localhost.
        let (key, cert) = try TestCertificates.signed(subjectAltName: "DNS:other.example")
        let wrongName = try ServerProcess.nghttpd(maxStreams: 100, key: key, certificate: cert)
        let server = try ServerProcess.nghttpd(maxStreams: 100)
        let byName = try TestSender(transport, host: "localhost", port: server.port)
        let mismatched = try TestSender(transport, port: wrongName.port)
        async let named = byName.run(count: 2)
        async let failed = mismatched.run(count: 2)
        let (answered, refused) = await (named.completions, failed.completions)
        _ = server.stop()
        _ = wrongName.stop()

        #expect(answered.count == 2)
        #expect(answered.allSatisfy { $0.outcome == CAPNS_ANSWERED })
        #expect(refused.count == 2)
        for c in refused {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.hasPrefix("127.0.0.1:\(wrongName.port): "), "\(c.error)")
            if transport == .nghttp2 {
                #expect(c.error == "127.0.0.1:\(wrongName.port): TLS: certificate verify failed (IP address mismatch)")
            }
        }
    }

    @Test(arguments: Transport.allCases)
    func anUntrustedCertificateFailsToConnectNamingTheEndpoint(_ transport: Transport) async throws {
        let server = try ServerProcess.nghttpd()
        let sender = try TestSender(transport, port: server.port, caFile: try TestCertificates.unrelatedCA())
        let (completions, _) = await sender.run(count: 3)
        _ = server.stop()

        expectEachTagOnce(completions, 3)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.hasPrefix("127.0.0.1:\(server.port): "))
            #expect(c.error.contains("certificate"), "\(c.error)")
            if transport == .nghttp2 {
                #expect(c.error == "127.0.0.1:\(server.port): TLS: certificate verify failed (unable to get local issuer certificate)")
            }
        }
    }

    @Test(arguments: Transport.allCases)
    func aRefusedPortFailsToConnect(_ transport: Transport) async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let (completions, _) = try await TestSender(transport, port: port).run(count: 2)

        expectEachTagOnce(completions, 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.hasPrefix("127.0.0.1:\(port): "))
            if transport == .nghttp2 {
                #expect(c.error == "127.0.0.1:\(port): connect: Connection refused")
            }
        }
    }

    /// `alpn`: what the HTTP/1 server offers in ALPN; nil: it takes no part in ALPN.
    @Test(arguments: Transport.allCases, [nil, "http/1.1"] as [String?])
    func aServerWithoutHTTP2IsRefused(_ transport: Transport, alpn: String?) async throws {
        let server = try ServerProcess.http1Only(alpn: alpn)
        let (completions, _) = try await TestSender(transport, port: server.port).run(count: 2)
        _ = server.stop()

        expectEachTagOnce(completions, 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.hasPrefix("127.0.0.1:\(server.port): "))
            #expect(c.error.contains("HTTP/2"), "\(c.error)")
            if transport == .nghttp2 {
                #expect(c.error == "127.0.0.1:\(server.port): server did not negotiate HTTP/2 (ALPN)")
            }
        }
    }

    @Test(arguments: Transport.allCases)
    func aServerThatNeverAnswersTimesOut(_ transport: Transport) async throws {
        let server = try SilentH2Server()
        let sender = try TestSender(transport, port: server.port, requestTimeoutMs: 300)
        let (completions, stats) = await sender.run(count: 5, seconds: 20)
        server.stop()

        expectEachTagOnce(completions, 5)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_TIMED_OUT })
        #expect(stats.timed_out == 5)
        if transport == .nghttp2 {
            for c in completions {
                #expect(c.error.hasPrefix("127.0.0.1:\(server.port): no answer within 300 ms"), "\(c.error)")
            }
            // No SETTINGS from this server: at most the one stream APNs allows at first was
            // opened (none when a loaded machine's handshake outlasts the 300 ms).
            #expect(stats.requests_started <= 1)
        }
    }

    @Test(arguments: Transport.allCases, Silence.allCases)
    func destroyCancelsEveryRequestInFlightExactlyOnce(_ transport: Transport, silence: Silence) async throws {
        let server = try silence.start()
        let sender = try TestSender(transport, port: server.port, connectTimeoutMs: 30_000, requestTimeoutMs: 60_000)
        let count = 300
        // Submit to destroy on a thread of its own: a test task held on the cooperative
        // pool past the connect timeout would see the requests fail before the destroy.
        let started = await offPool { [sender] in
            sender.submitNow(tags: 0..<count)
            usleep(200_000)
            if silence == .afterHandshake {
                // The handshake first: a minute is a hang guard for a loaded machine.
                for _ in 0..<6_000 where sender.stats.requests_started == 0 { usleep(10_000) }
            }
            let started = sender.stats.requests_started
            sender.destroyNow()
            return started
        }
        if silence == .afterHandshake && transport == .nghttp2 { #expect(started == 1) }
        server.stop()

        let completions = sender.collector.completions
        expectEachTagOnce(completions, count)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_CANCELLED })
    }
}
