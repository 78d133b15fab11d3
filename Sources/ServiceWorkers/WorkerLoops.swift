import Logging
import ServiceDelivery
import ServiceLifecycle
import Synchronization

/// Set once a worker is to stop: read by its loop and by what it does meanwhile.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    var isSet: Bool { flag.load(ordering: .acquiring) }
    func set() { flag.store(true, ordering: .releasing) }
}

/// The loop of a worker that claims rows under a lease, until graceful shutdown:
/// claim, handle what came (the batch in hand is finished before the loop ends);
/// with nothing due, wait for a wake-up or `poll`. A failed claim is logged
/// ("`name` claim failed") and tried again after a second.
func claimLoop<Row: Sendable>(_ name: String, stopping: StopFlag, wakeup: WorkerWakeup, poll: Duration, logger: Logger,
                              claim: () async throws -> [Row], handle: ([Row]) async -> Void) async {
    await withGracefulShutdownHandler {
        while !stopping.isSet {
            let claimed: [Row]
            do {
                claimed = try await claim()
            } catch {
                logger.error("\(name) claim failed", metadata: ["error": "\(error)"])
                await wakeup.wait(timeout: .seconds(1))
                continue
            }
            if claimed.isEmpty {
                await wakeup.wait(timeout: poll)
                continue
            }
            await handle(claimed)
        }
    } onGracefulShutdown: {
        stopping.set()
        wakeup.wake()
    }
}

/// `work` at once and then every `interval`, until graceful shutdown.
func repeatUntilShutdown(every interval: Duration, _ work: @escaping @Sendable () async -> Void) async {
    await cancelWhenGracefulShutdown {
        while !Task.isCancelled {
            await work()
            try? await Task.sleep(for: interval)
        }
    }
}
