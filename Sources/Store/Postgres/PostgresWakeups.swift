import Logging
import PostgresNIO
import Synchronization

/// Wakes this instance's idle workers when any instance enqueues: enqueue sends
/// `NOTIFY apns_outbox` in its transaction (delivered at commit), and one connection
/// per instance LISTENs. LISTEN/NOTIFY rather than polling, because a poll fast
/// enough to wake within a second costs every instance a query per second per
/// worker even when idle, and polling still bounds the wait when a notification is
/// lost: the worker waits with a timeout, and a reconnect counts as a wake (anything
/// may have been enqueued while the connection was down).
///
/// A wake with nobody waiting is kept for the next waiter, so none is lost between a
/// worker's empty claim and its wait. The LISTEN connection is opened by the first
/// wait, not before: a store that never waits (a tool, a test) never opens it.
final class PostgresWakeups: Sendable {
    private struct State {
        var pending = false
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var abandoned: Set<UInt64> = []
        var next: UInt64 = 0
        var listener: Task<Void, Never>?
        var closed = false
        /// Times the LISTEN connection was (re)established.
        var listening = 0
    }

    private let state = Mutex(State())
    private let configuration: PostgresStore.Configuration

    init(_ configuration: PostgresStore.Configuration) {
        self.configuration = configuration
    }

    /// How many times LISTEN has been set up: tests wait for it before they notify.
    var listenCount: Int { state.withLock { $0.listening } }

    /// Workers waiting now: tests wait for one before they close the store.
    var waiterCount: Int { state.withLock { $0.waiters.count } }

    func wake() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            if s.waiters.isEmpty { s.pending = true }
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for w in waiters { w.resume(returning: true) }
    }

    /// Returns true on a wake, false after `timeout` or when the task is cancelled.
    /// `close()` ends the waits under way (false); a wait after it is a plain timer
    /// (a loop around it does not spin while its task is being cancelled).
    func wait(timeout: Duration) async -> Bool {
        startListening()
        let id = state.withLock { s -> UInt64?? in
            if s.closed { return .some(nil) }
            if s.pending { s.pending = false; return nil }
            s.next += 1
            return s.next
        }
        guard let id else { return true }
        guard let id else {
            try? await Task.sleep(for: timeout)
            return false
        }
        // The waiter is resumed exactly once: by a wake (true), or by the timer,
        // which ends by itself or on cancellation (false).
        let woken = await withTaskGroup(of: Bool?.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.resume(id)
                return nil
            }
            group.addTask {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    // A wake between the id and here was kept as pending: it is ours.
                    let now = self.state.withLock { s -> Bool? in
                        if s.abandoned.remove(id) != nil || s.closed { return false }
                        if s.pending { s.pending = false; return true }
                        s.waiters[id] = continuation
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            }
            var woken = false
            for await result in group {
                if let result {
                    woken = result
                    group.cancelAll()
                }
            }
            return woken
        }
        state.withLock { _ = $0.abandoned.remove(id) }
        return woken
    }

    /// Ends the LISTEN connection; waiting workers return (false) at once.
    func close() async {
        let (listener, waiters) = state.withLock { s -> (Task<Void, Never>?, [CheckedContinuation<Bool, Never>]) in
            s.closed = true
            defer {
                s.listener = nil
                s.waiters.removeAll()
            }
            return (s.listener, Array(s.waiters.values))
        }
        for w in waiters { w.resume(returning: false) }
        listener?.cancel()
        await listener?.value
    }

    private func resume(_ id: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Bool, Never>? in
            if let w = s.waiters.removeValue(forKey: id) { return w }
            s.abandoned.insert(id)
            return nil
        }
        waiter?.resume(returning: false)
    }

    private func startListening() {
        state.withLock { s in
            guard s.listener == nil, !s.closed else { return }
            s.listener = Task { [self] in await listen() }
        }
    }

    /// LISTEN until cancelled, reconnecting after a lost connection (a database
    /// restart) with a pause between attempts.
    private func listen() async {
        while !Task.isCancelled {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: try configuration.connection(), id: 1, logger: PostgresStore.quiet)
                do {
                    try await connection.listen(on: PostgresStore.workChannel) { notifications in
                        state.withLock { $0.listening += 1 }
                        wake()
                        for try await _ in notifications { wake() }
                    }
                } catch {}
                try? await connection.close()
            } catch {}
            try? await Task.sleep(for: .milliseconds(500))
        }
    }
}

extension PostgresStore {
    /// Returns true when an enqueue (by any instance on this database) may have added
    /// work; false after `timeout`, or when the task is cancelled. The worker's idle wait.
    @discardableResult
    public func waitForWork(timeout: Duration) async -> Bool {
        await wakeups.wait(timeout: timeout)
    }
}
