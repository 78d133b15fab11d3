import APNs

/// Runs async work with its jobs on a serial queue of its own instead of the
/// cooperative pool (a task executor preference): every `await` in it, a store's
/// query, a sleep, resumes there.
///
/// For a watch that must see a short-lived state and act on it at once: the pool
/// is shared by every test and has one thread per core, so other tests' blocking
/// calls can hold it for seconds, longer than the state lasts. `offPool` is for
/// blocking work; this is for async work that cannot wait for the pool.
public func offPoolTask<T: Sendable>(_ work: () async throws -> T) async rethrows -> T {
    try await withTaskExecutorPreference(SerialQueueExecutor(label: "tests.off-pool-task")) { try await work() }
}
