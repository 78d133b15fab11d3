import Foundation
import Synchronization

/// Requests waiting for the first request with their idempotency key to answer,
/// woken as soon as it does in this process; `IdempotencyGate` still bounds each
/// wait, for a first request on another instance.
final class IdempotencyWakeups: Sendable {
    private struct State {
        var waiting: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]
        /// Waits whose time ran out before their continuation was registered.
        var expired: Set<UUID> = []
    }
    private let state = Mutex(State())

    /// Returns when `key` is woken, or after `atMost`, whichever comes first.
    func wait(_ key: String, atMost: Duration) async {
        guard atMost > .zero else { return }
        let id = UUID()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(for: atMost)
                self.expire(key, id)
            }
            group.addTask {
                await withCheckedContinuation { continuation in self.register(key, id, continuation) }
            }
            await group.next()
            group.cancelAll()
            // The other child ends too: the sleep on its cancellation, the
            // continuation by `expire`, which the sleep's end calls.
        }
        state.withLock { _ = $0.expired.remove(id) }
    }

    /// Wakes every request waiting on `key`.
    func wake(_ key: String) {
        let woken = state.withLock { $0.waiting.removeValue(forKey: key) } ?? [:]
        for continuation in woken.values { continuation.resume() }
    }

    private func register(_ key: String, _ id: UUID, _ continuation: CheckedContinuation<Void, Never>) {
        let ready = state.withLock { s -> Bool in
            if s.expired.remove(id) != nil { return true }
            s.waiting[key, default: [:]][id] = continuation
            return false
        }
        if ready { continuation.resume() }
    }

    private func expire(_ key: String, _ id: UUID) {
        let continuation = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let c = s.waiting[key]?.removeValue(forKey: id) {
                if s.waiting[key]?.isEmpty == true { s.waiting.removeValue(forKey: key) }
                return c
            }
            s.expired.insert(id)
            return nil
        }
        continuation?.resume()
    }
}
