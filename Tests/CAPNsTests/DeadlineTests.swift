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
    /// holds the sender thread (its callback) while request 1 is submitted and, 500 ms
    /// later, request 2 as a resend, which the sender then takes ahead of 1. Request 1's
    /// deadline comes first, so it must time out first: had the resend's later deadline
    /// hidden it, request 1 would end with or after request 2. Proved by the order of
    /// the completions, not by a time that a loaded machine stretches: when the sender
    /// thread runs late, both are due at once and still end oldest first.
    @Test("A resend taken ahead of an older request does not delay its deadline", arguments: Transport.allCases)
    func resendDoesNotHideOlderDeadline(transport: Transport) async throws {
        let mock = try InProcessMock { $0.stall = 1 }
        let sender = try TestSender(transport, port: mock.port, requestTimeoutMs: 1000, topic: TestPKI.shared.topic,
                                    providerToken: try InProcessMock.providerToken())
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        sender.collector.onFirstBatch {
            held.signal()
            _ = release.wait(timeout: .now() + 120)    // a hang guard only
        }
        await sender.submit(tags: 0..<1)
        let isHeld = await offPool { held.wait(timeout: .now() + 120) == .success }
        #expect(isHeld, "request 0 never timed out")
        // On a thread of its own, so that nothing comes between the resend and the release:
        // a release so late that the resend's deadline had passed too would have both
        // expire together in the queue, in its order (the resend first).
        await offPool {
            sender.submitNow(tags: 1..<2)             // the sender thread is held: both wait in its queue
            usleep(500_000)
            sender.submitNow(tags: 2..<3, resend: true)
            release.signal()
        }
        await sender.collector.wait(for: 3, seconds: 120)
        await sender.destroy()
        _ = await mock.stop()

        let completions = sender.collector.completions
        #expect(completions.map(\.tag) == [0, 1, 2], "request 1 must time out before the resend taken ahead of it")
        #expect(completions.allSatisfy { $0.outcome == CAPNS_TIMED_OUT })
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
