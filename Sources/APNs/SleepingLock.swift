import Glibc

/// A lock for state that one thread can hold a while, whose waiters spin briefly
/// and then sleep.
///
/// The lane's state is held by the sender thread for a whole batch of answers
/// (hundreds of results made), while callers on the pool queue up to enter.
/// `Synchronization.Mutex` is a priority-inheriting futex on Linux: a waiter spins,
/// in user space and then in the kernel, for as long as the holder runs, so every
/// contended entry burned a core on the two-core benchmark machine. A plain glibc
/// mutex parks the waiter after one failed exchange: a caller's own entry holds the
/// lock for about a microsecond, so two callers meeting there put one to sleep and
/// woke it again (a futex call each way, ~23k per 100k single sends). glibc's
/// adaptive mutex spins a bounded number of times first, then sleeps: the short
/// holds pass without the kernel, the sender thread's long ones still park waiters
/// (~8k futex calls per 100k).
final class SleepingLock<Value>: @unchecked Sendable {   // `value` is reached only under `mutex`
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    /// Behind a pointer, not a stored property: no exclusivity check on each access.
    private let value: UnsafeMutablePointer<Value>

    init(_ initial: Value) {
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_settype(&attr, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))   // see above
        pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
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
