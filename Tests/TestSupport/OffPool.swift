import Foundation

/// Runs blocking work (waitpid, a pipe read to its end, a program run to
/// completion) on a thread of its own and awaits it.
///
/// Every test shares Swift's cooperative pool, which has one thread per core: two
/// here. A test that blocks one of them for a minute (an apns-send run it waits for)
/// stalls every other test, and tests that poll for a state then miss it. A fresh
/// thread, not a Dispatch queue: Dispatch's pool grows only slowly when its
/// threads block.
public func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: work()) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
