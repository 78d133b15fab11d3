import Logging
import ServiceCore
import ServiceLifecycle
import Store

/// Keeps `/metrics`' outbox gauges (depth, waiting, oldest due) current: counted every
/// `metrics_refresh_ms` by this service, never by a scrape, so that however often
/// (or by whom) `/metrics` is asked, the outbox is counted at one fixed rate.
package final class OutboxGauges: Service, Sendable {
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let interval: Duration
    let logger: Logger

    package init(refreshMillis: Int, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics, logger: Logger) {
        self.store = store
        self.clock = clock
        self.metrics = metrics
        interval = .milliseconds(refreshMillis)
        self.logger = logger
    }

    package func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.refresh()
                try? await Task.sleep(for: self.interval)
            }
        }
    }

    func refresh() async {
        do {
            metrics.outboxDepth.set(Int64(try await store.outboxDepth()))
            let now = clock.nowMillis
            metrics.outboxWaiting.set(Int64(try await store.outboxWaiting(now: now)))
            let oldestDue = try await store.outboxOldestDue(now: now)
            metrics.outboxOldestDue.set(Double(max(0, now - (oldestDue ?? now))) / 1000)
        } catch {
            logger.warning("outbox depth unavailable", metadata: ["error": "\(error)"])
        }
    }
}
