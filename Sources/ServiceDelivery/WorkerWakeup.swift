import Store
import Synchronization

/// Lets an enqueue wake the idle workers at once instead of at their next poll.
/// A wake with nobody waiting is kept for the next waiter, so none is lost between
/// a worker's empty claim and its wait.
package final class WorkerWakeup: Sendable {
    private struct State {
        var pending = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var abandoned: Set<UInt64> = []
        var next: UInt64 = 0
    }

    private let state = Mutex(State())

    package init() {}

    package func wake() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.waiters.isEmpty { s.pending = true }
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume() }
    }

    /// Returns on a wake, after `timeout`, or when the task is cancelled.
    package func wait(timeout: Duration) async {
        let id = state.withLock { s -> UInt64? in
            if s.pending { s.pending = false; return nil }
            s.next += 1
            return s.next
        }
        guard let id else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.resume(id)
            }
            group.addTask {
                await withCheckedContinuation { continuation in
                    let resumeNow = self.state.withLock { s -> Bool in
                        if s.abandoned.remove(id) != nil { return true }
                        s.waiters[id] = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
            await group.next()
            group.cancelAll()
            await group.waitForAll()
        }
        state.withLock { _ = $0.abandoned.remove(id) }
    }

    private func resume(_ id: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiters.removeValue(forKey: id) { return w }
            s.abandoned.insert(id)
            return nil
        }
        waiter?.resume()
    }
}

extension WorkerWakeup {
    /// Passes every wake of `outbox` on to the idle workers, until cancelled, so that
    /// work another instance enqueued is claimed at once rather than at the next poll
    /// (which stays, as the fallback for a notification lost with its connection).
    package func follow(_ outbox: any SharedOutbox) async {
        while !Task.isCancelled {
            if await outbox.waitForWork(timeout: .seconds(5)) { wake() }
        }
    }
}
