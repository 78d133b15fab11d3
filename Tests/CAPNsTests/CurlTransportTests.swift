import CAPNs
import Foundation
import Testing
import TestSupport

/// What is the libcurl transport's own; what both transports share is in TransportSharedTests.
@Suite(.serialized) struct CurlTransportTests {
    @Test func aBatchCompletesExactlyOnceOverOneConnectionWithoutResets() async throws {
        let server = try ServerProcess.nghttpd(verbose: true)
        // The deadlines are hang guards: under AddressSanitizer on a loaded machine, a
        // thousand streams in flight through libcurl take longer than the default 20 s
        // each, and a request that times out is reset (which this test counts).
        let sender = try TestSender(.curl, port: server.port, requestTimeoutMs: 600_000)
        let count = 3000

        let (completions, stats) = await sender.run(count: count, seconds: 900)
        let log = server.stop()

        expectEachTagOnce(completions, count)
        // nghttpd answers 404 (no such file) with an HTML body: a real HTTP/2 answer.
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 404 })
        #expect(stats.connections_opened == 1)
        #expect(stats.connections_lost == 0)
        #expect(stats.requests_started == UInt64(count))
        #expect(stats.peak_streams > 1)
        // Rapid-reset protection would drop a connection after ~1000 resets; send none.
        let resets = log.components(separatedBy: "recv RST_STREAM").count - 1
        #expect(resets == 0)
    }

    /// libcurl's request deadline covers the TLS handshake (the nghttp2 transport's
    /// connect timeout does: H2TransportTests).
    @Test func aHandshakeThatNeverEndsHitsTheRequestDeadline() async throws {
        let listener = SilentPort()
        let sender = try TestSender(.curl, port: listener.port, connectTimeoutMs: 30000, requestTimeoutMs: 300)
        let (completions, stats) = await sender.run(count: 5, seconds: 20)

        expectEachTagOnce(completions, 5)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_TIMED_OUT })
        #expect(stats.timed_out == 5)
    }
}
