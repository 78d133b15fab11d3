import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// request_timeout_ms runs from each request's own submit: a resend taken ahead of
/// older requests does not push their deadline back. NOT_PROCESSED that may have been
/// processed is counted apart (lost_in_flight).
@Suite(.serialized) struct DeadlineTests {
    /// The mock reads and never answers (stall). The first request's timeout completion
    /// holds the sender thread for 800 ms (its callback); meanwhile request 1 is submitted,
    /// and 500 ms later request 2 as a resend, which the sender takes ahead of 1. Request 1
    /// must still time out a timeout after its own submit, not after the resend's.
    @Test("A resend taken ahead of an older request does not delay its deadline", arguments: Transport.allCases)
    func resendDoesNotHideOlderDeadline(transport: Transport) async throws {
        let mock = try InProcessMock { $0.stall = 1 }
        let sender = try TestSender(transport, port: mock.port, requestTimeoutMs: 1000, topic: TestPKI.shared.topic,
                                    providerToken: try InProcessMock.providerToken())
        let busy = DispatchSemaphore(value: 0)
        sender.collector.onFirstBatch {
            busy.signal()
            usleep(800_000)
        }
        await sender.submit(tags: 0..<1)
        await offPool { busy.wait() }           // the sender thread is held from here
        await sender.submit(tags: 1..<2)
        try await Task.sleep(for: .milliseconds(500))
        await sender.submit(tags: 2..<3, resend: true)
        await sender.collector.wait(for: 3, seconds: 10)
        await sender.destroy()
        _ = await mock.stop()

        let byTag = Dictionary(uniqueKeysWithValues: sender.collector.completions.map { ($0.tag, $0) })
        let first = try #require(byTag[1])
        #expect(first.outcome == CAPNS_TIMED_OUT)
        // Its own deadline is 1000 ms; the resend's would have made it ~1500 ms.
        #expect(first.latencyMs < 1300, "request 1 timed out after \(first.latencyMs) ms")
        #expect(byTag[2]?.outcome == CAPNS_TIMED_OUT)
    }

    /// nghttp2 only: libcurl sends a request lost with a reused connection again by itself
    /// (on a new connection), so on the curl transport it comes back answered.
    @Test("Requests lost with a reset connection count in lost_in_flight; GOAWAY-refused ones do not")
    func lostInFlight() async throws {
        let transport = Transport.nghttp2
        let reset = try InProcessMock { $0.reset_after = 2 }
        let sender = try TestSender(transport, mock: reset)
        await sender.submit(count: 1)
        await sender.collector.wait(for: 1, seconds: 10)
        await sender.submit(tags: 1..<2)                    // the mock resets on it
        await sender.collector.wait(for: 2, seconds: 10)
        let lost = sender.stats
        await sender.destroy()
        _ = await reset.stop()
        #expect(sender.collector.completions.last?.outcome == CAPNS_NOT_PROCESSED)
        #expect(lost.lost_in_flight == 1)

        let goaway = try InProcessMock { $0.goaway_after = 1; $0.initial_streams = 10; $0.max_streams = 10 }
        let other = try TestSender(transport, mock: goaway)
        let (completions, stats) = await other.run(count: 5, seconds: 20)
        _ = await goaway.stop()
        expectEachTagOnce(completions, 5)
        #expect(stats.lost_in_flight == 0)
    }
}

extension Completion {
    var latencyMs: Int64 { latencyNs / 1_000_000 }
}
