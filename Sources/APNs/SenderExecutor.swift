import Dispatch

/// A task executor on one lane's sender thread. Its jobs run there once per turn of
/// the thread's loop, right after that turn's answers were handed to their owners. A
/// batch consumed on it takes its results, writes them and starts its next requests
/// on the thread that reads and writes the connection, so no thread wakes another
/// to hand results over, and on a machine with few cores the process takes one, as
/// h2load does, not two.
///
/// Its jobs must not block for long: the connection waits while they run (a regular
/// file's reads and writes are fine; a pipe's or a terminal's are not). Once the
/// lane is destroyed, jobs run on a global queue instead. A job must not shut the
/// client down without draining it first (`APNsClient.shutdown()` drains; `abandon()`
/// does not).
final class SenderExecutor: TaskExecutor {
    private let lane: Lane

    init(lane: Lane) {
        self.lane = lane
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let posted = Posted(job: UnownedJob(job), executor: self)
        if !lane.post(posted) {
            DispatchQueue.global().async { posted.run() }
        }
    }

    /// One job on its way to the thread, keeping its executor alive until it ran.
    final class Posted: @unchecked Sendable {   // run once, by whichever thread takes it
        private let job: UnownedJob
        private let executor: SenderExecutor

        init(job: UnownedJob, executor: SenderExecutor) {
            self.job = job
            self.executor = executor
        }

        func run() {
            job.runSynchronously(on: executor.asUnownedTaskExecutor())
        }
    }
}
