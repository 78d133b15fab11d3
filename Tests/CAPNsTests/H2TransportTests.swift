import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

/// What is the nghttp2 transport's own (CAPNS_TRANSPORT_NGHTTP2, the default), through the
/// C API: against nghttpd for the server's stream limit, several connections, optional
/// headers, certificate names, connect timeout and PING; against the C mock APNs server
/// (CAPNsMock) for real APNs answers and faults: GOAWAY, connection resets, a stream
/// limit that drops at runtime. What both transports share is in TransportSharedTests.
@Suite(.serialized) struct H2TransportTests {
    @Test func aBatchOf20000CompletesExactlyOnceOverOneConnection() async throws {
        let server = try ServerProcess.nghttpd(maxStreams: 1000)
        let sender = try TestSender(port: server.port, maxOutstanding: 4000)
        let count = 20_000

        let (completions, stats) = await sender.run(count: count, seconds: 120)
        _ = server.stop()

        expectEachTagOnce(completions, count)
        // nghttpd answers 404 (no such file): a real HTTP/2 answer to every POST.
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 404 })
        #expect(stats.connections_opened == 1)
        #expect(stats.connections_lost == 0)
        #expect(stats.requests_started == UInt64(count))
        #expect(stats.completed == UInt64(count))
        #expect(stats.server_max_streams == 1000)
        #expect(stats.peak_streams > 1 && stats.peak_streams <= 1000)
    }

    @Test func theServersStreamLimitIsHonoured() async throws {
        let server = try ServerProcess.nghttpd(maxStreams: 7)
        let sender = try TestSender(port: server.port, maxOutstanding: 500)
        let count = 2000

        let (completions, stats) = await sender.run(count: count)
        _ = server.stop()

        #expect(completions.filter { $0.outcome == CAPNS_ANSWERED }.count == count)
        #expect(stats.server_max_streams == 7)
        #expect(stats.peak_streams == 7)
    }

    @Test func requestsAreSpreadOverSeveralConnections() async throws {
        let server = try ServerProcess.nghttpd(maxStreams: 50)
        let sender = try TestSender(port: server.port, connections: 3, maxOutstanding: 600)
        let count = 6000

        let (completions, stats) = await sender.run(count: count)
        _ = server.stop()

        expectEachTagOnce(completions, count)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED })
        #expect(stats.connections_opened == 3)
        #expect(stats.peak_streams <= 50)
    }

    @Test func aHandshakeThatNeverEndsHitsTheConnectTimeout() async throws {
        let listener = SilentPort()
        let sender = try TestSender(port: listener.port, connectTimeoutMs: 300)
        let (completions, _) = await sender.run(count: 2, seconds: 10)

        #expect(completions.count == 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error == "127.0.0.1:\(listener.port): connect timed out after 300 ms")
        }
    }

    @Test func anUnansweredPingClosesTheConnection() async throws {
        let server = try SilentH2Server()
        let sender = try TestSender(port: server.port, requestTimeoutMs: 30_000, pingIntervalMs: 200)
        let (completions, stats) = await sender.run(count: 3, seconds: 10)
        server.stop()

        #expect(completions.count == 3)
        // The one stream in flight was lost with the connection; the two waiting for a
        // stream fail with it, as this connection never gave an answer.
        let lost = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(lost.count == 1)
        #expect(lost.first?.error == "127.0.0.1:\(server.port): connection lost: PING not acknowledged within 200 ms")
        #expect(completions.filter { $0.outcome == CAPNS_CONNECT_FAILED }.count == 2)
        #expect(stats.connections_lost == 1)
    }

    // MARK: against the mock APNs server

    @Test func aGoawayEndsLaterStreamsNotProcessedAndANewConnectionTakesOver() async throws {
        let mock = try InProcessMock { $0.goaway_after = 500 }
        let count = 1800
        let (completions, stats) = try await TestSender(mock: mock, maxOutstanding: 2000).run(count: count)
        _ = await mock.stop()

        expectEachTagOnce(completions, count)
        let refused = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED || $0.outcome == CAPNS_NOT_PROCESSED })
        #expect(!refused.isEmpty)
        #expect(refused.allSatisfy { $0.error.contains("above GOAWAY last-stream-id") }, "\(refused.first?.error ?? "")")
        #expect(stats.goaways_received >= 1)
        #expect(stats.connections_opened >= 2)
        #expect(stats.connections_lost == 0)
    }

    @Test func aResetConnectionEndsItsStreamsNotProcessedAndPendingMovesOn() async throws {
        let mock = try InProcessMock { $0.reset_after = 300 }
        // More requests than the sender holds: some still wait in its queue at the reset.
        let count = 3000
        let (completions, stats) = try await TestSender(mock: mock, maxOutstanding: 2000).run(count: count)
        _ = await mock.stop()

        expectEachTagOnce(completions, count)
        let lost = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }
        #expect(!lost.isEmpty)
        #expect(lost.allSatisfy { $0.error.contains("connection lost") }, "\(lost.first?.error ?? "")")
        #expect(completions.filter { $0.outcome == CAPNS_ANSWERED }.count + lost.count == count)
        #expect(stats.connections_lost >= 1)
        #expect(stats.connections_opened >= 2)
    }

    @Test func aStreamLimitThatDropsAtRuntimeIsFollowed() async throws {
        let mock = try InProcessMock {
            $0.settings_drop_after = 200
            $0.settings_drop_to = 2
        }
        let count = 1500
        let (completions, stats) = try await TestSender(mock: mock).run(count: count)
        _ = await mock.stop()

        expectEachTagOnce(completions, count)
        #expect(stats.server_max_streams == 2)
        // Streams sent before the SETTINGS arrived may be refused; afterwards none are.
        let refused = completions.filter { $0.outcome == CAPNS_NOT_PROCESSED }.count
        #expect(completions.filter { $0.outcome == CAPNS_ANSWERED && $0.status == 200 }.count + refused == count)
        #expect(refused < 1000)
    }
}
