import Glibc

/// A lock whose waiters sleep at once, for state that one thread can hold a while.
///
/// The lane's state is held by the sender thread for a whole batch of answers
/// (hundreds of results made), while callers on the pool queue up to enter.
/// `Synchronization.Mutex` is a priority-inheriting futex on Linux: a waiter spins,
/// in user space and then in the kernel, for as long as the holder runs, so every
/// contended entry burned a core on the two-core benchmark machine. A plain glibc
/// mutex parks the waiter after one failed exchange.
final class SleepingLock<Value>: @unchecked Sendable {   // `value` is reached only under `mutex`
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Behind a pointer, not a stored property: no exclusivity check on each access.
    private let value: UnsafeMutablePointer<Value>

    init(_ initial: Value) {
        pthread_mutex_init(mutex, nil)
        value = .allocate(capacity: 1)
        value.initialize(to: initial)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value.pointee)
    }
}
