import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

/// PING liveness against a server that answers requests but never acknowledges a PING
/// (the mock's no_ping_ack). The answer arrives after the PING went out and before its
/// deadline: reading it once kept the PING "outstanding but excused" forever, with the
/// loop's timeout at 0 (measured 1.84 s CPU in 2 s idle) and the connection never
/// replaced. Now the deadline ends the connection and the next request opens another.
@Suite(.serialized) struct PingAckTests {
    @Test("A PING never acknowledged: the connection is replaced and the sender thread stays idle")
    func pingNeverAcknowledged() async throws {
        // PING after 2 s without a read, ACK due 2 s later; the answer comes at ~3 s, so a
        // loaded machine may deliver it up to a second late and still inside the window.
        let mock = try InProcessMock { cfg in
            cfg.no_ping_ack = 1
            cfg.latency_us = 3_000_000
        }
        let sender = try TestSender(.nghttp2, port: mock.port, requestTimeoutMs: 20_000, pingIntervalMs: 2_000,
                                    topic: TestPKI.shared.topic, providerToken: try InProcessMock.providerToken())
        await sender.submit(tags: 0..<1)
        await sender.collector.wait(for: 1, seconds: 60)
        #expect(sender.collector.completions.first?.status == 200)

        let before = try #require(sender.collector.senderCPUSeconds)
        try await Task.sleep(for: .seconds(2))
        let after = try #require(sender.collector.senderCPUSeconds)
        #expect(after - before < 0.3, "sender thread used \(after - before) s CPU in 2 s idle")
        // Lost when the PING's ACK is due, well inside those 2 s; a loaded machine may get
        // there later (a minute is a hang guard only).
        for _ in 0..<6_000 where sender.stats.connections_lost == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(sender.stats.connections_lost == 1)

        await sender.submit(tags: 1..<2)
        await sender.collector.wait(for: 2, seconds: 60)
        let stats = sender.stats
        await sender.destroy()
        _ = await mock.stop()

        expectEachTagOnce(sender.collector.completions, 2)
        #expect(sender.collector.completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 200 })
        #expect(stats.connections_opened == 2)
    }
}
