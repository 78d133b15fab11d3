import Dispatch

/// A task executor on one serial dispatch queue. The send loop runs on it, so the
/// blocking reads of tokens.txt (the library pulls tokens from inside its async
/// iterator) and the writes of records happen on this thread, never on the
/// cooperative pool.
final class IOExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "apns-send.io")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
