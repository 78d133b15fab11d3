import CAPNs
import Foundation
import Synchronization
import Testing
import TestSupport

/// capns_sender_post: a task runs on the sender thread, in the order it was posted; a
/// task may destroy its own sender, which then ends by itself.
@Suite struct PostedTaskTests {
    /// What the posted tasks saw, and a wait until all of them ran.
    final class Runs: @unchecked Sendable {
        private let lock = NSLock()
        private var seen: [(poster: Int, seq: Int, onSenderThread: Bool)] = []
        private let all = DispatchSemaphore(value: 0)
        let expected: Int

        init(expected: Int) { self.expected = expected }

        func ran(poster: Int, seq: Int, onSenderThread: Bool) {
            let done = lock.withLock {
                seen.append((poster, seq, onSenderThread))
                return seen.count == expected
            }
            if done { all.signal() }
        }

        /// Off the cooperative pool; a hang guard, not a timing.
        func wait() async -> [(poster: Int, seq: Int, onSenderThread: Bool)] {
            _ = await offPool { [all] in all.wait(timeout: .now() + 60) }
            return lock.withLock { seen }
        }
    }

    @Test("Tasks posted from two threads run on the sender thread, each thread's in order",
          arguments: Transport.allCases)
    func tasksRunOnTheSenderThreadInOrder(transport: Transport) async throws {
        let mock = try InProcessMock()
        let sender = try TestSender(transport, port: mock.port)
        // Requests in flight meanwhile: the tasks share the thread with their answers.
        await sender.submit(count: 200)
        let perPoster = 500
        let runs = Runs(expected: 2 * perPoster)
        #expect(!sender.isCurrent)
        let refused = await withTaskGroup(of: Int.self) { group in
            for poster in 0..<2 {
                group.addTask {
                    await offPool {
                        (0..<perPoster).filter { seq in
                            sender.post { runs.ran(poster: poster, seq: seq, onSenderThread: sender.isCurrent) } != 0
                        }.count
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(refused == 0)
        let seen = await runs.wait()
        #expect(seen.count == 2 * perPoster)
        #expect(seen.allSatisfy { $0.onSenderThread })
        for poster in 0..<2 {
            #expect(seen.filter { $0.poster == poster }.map(\.seq) == Array(0..<perPoster))
        }
        await sender.collector.wait(for: 200)
        #expect(sender.collector.completions.count == 200)
        await sender.destroy()
        _ = await mock.stop()
    }

    /// The thread cannot wait for itself: destroy returns, the task goes on (and may
    /// still post), and the thread ends without delivering completions to an owner
    /// that is going away. Requests here wait on a server that never answers, so
    /// each would complete CANCELLED.
    @Test("A task that destroys its own sender returns, and the thread ends by itself")
    func aTaskDestroysItsOwnSender() async throws {
        let silent = SilentPort()
        let sender = try TestSender(port: silent.port, connectTimeoutMs: 60_000)
        let later = Atomic<Int32>(99)
        // Submitted and destroyed back to back on a thread of its own: a test task held
        // on the cooperative pool past the requests' deadline would see them time out
        // (and complete) before its destroy.
        let posted = await offPool { [sender] in
            sender.submitNow(tags: 0..<5)
            let done = DispatchSemaphore(value: 0)
            let posted = sender.destroyFromItsOwnThread { postedAfter in
                later.store(postedAfter, ordering: .relaxed)
                done.signal()
            }
            _ = done.wait(timeout: .now() + 60)
            return posted
        }
        #expect(posted == 0)
        #expect(later.load(ordering: .relaxed) == 0, "a post from the task itself was refused")
        // Time for the thread to end: a completion delivered now would show here.
        try await Task.sleep(for: .milliseconds(300))
        #expect(sender.collector.completions.isEmpty, "\(sender.collector.completions.count) completions after destroy")
        silent.stop()
    }
}
