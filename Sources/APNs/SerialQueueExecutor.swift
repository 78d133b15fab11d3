import Dispatch

/// A task executor on one serial dispatch queue of its own: every job of a task that
/// prefers it runs there, off Swift's cooperative pool.
///
/// For work that must not wait for the pool or hold it: apns-send's loop when its
/// reads or writes can block (a pipe, a terminal), and in tests a watch that must act
/// on a short-lived state while other tests' blocking calls hold the pool's threads.
/// A serial queue of one's own is overcommitting: Dispatch gives it a thread when it
/// has work, however busy its other threads are.
package final class SerialQueueExecutor: TaskExecutor {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label)
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
