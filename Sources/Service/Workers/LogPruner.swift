import Logging
import ServiceLifecycle
import Store

/// Retention: deletes what the log has finished with, once it is older than
/// `retention.days` (a notification only when every one of its deliveries is final),
/// and tokens deactivated more than `retention.inactive_device_days` ago, at start
/// and then every `retention.interval_seconds`.
///
/// Many small transactions rather than one large one: a long transaction would hold
/// SQLite's writer away from the outbox, and on PostgreSQL it holds back VACUUM for
/// every table, the hot outbox included.
final class LogPruner: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let logger: Logger

    /// Notifications (and broadcasts) per transaction.
    static let batch = 500

    init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    func run() async throws {
        guard config.retention.days > 0 || config.retention.inactiveDeviceDays > 0 else { return }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.pruneOnce()
                try? await Task.sleep(for: .seconds(self.config.retention.intervalSeconds))
            }
        }
    }

    /// Everything due now, a batch at a time; returns the log's total.
    @discardableResult
    func pruneOnce() async -> PruneResult {
        await pruneDevices()
        guard config.retention.days > 0 else { return PruneResult() }
        let cutoff = clock.nowMillis - Int64(config.retention.days) * 86_400_000
        var total = PruneResult()
        while !Task.isCancelled {
            do {
                let step = try await store.pruneLog(before: cutoff, limit: Self.batch)
                metrics.pruned(step)
                total.notifications += step.notifications
                total.deliveries += step.deliveries
                total.broadcasts += step.broadcasts
                if step.notifications < Self.batch && step.broadcasts < Self.batch { break }
            } catch {
                logger.error("log pruning failed", metadata: ["error": "\(error)"])
                break
            }
        }
        if !total.isEmpty {
            logger.info("log pruned", metadata: ["notifications": "\(total.notifications)",
                                                 "deliveries": "\(total.deliveries)", "broadcasts": "\(total.broadcasts)"])
        }
        return total
    }

    /// Tokens deactivated long enough ago, a batch at a time; how many went.
    @discardableResult
    func pruneDevices() async -> Int {
        guard config.retention.inactiveDeviceDays > 0 else { return 0 }
        let cutoff = clock.nowMillis - Int64(config.retention.inactiveDeviceDays) * 86_400_000
        var total = 0
        while !Task.isCancelled {
            do {
                let step = try await store.pruneDevices(inactiveBefore: cutoff, limit: Self.batch)
                total += step
                if step < Self.batch { break }
            } catch {
                logger.error("device pruning failed", metadata: ["error": "\(error)"])
                break
            }
        }
        if total > 0 { logger.info("inactive devices pruned", metadata: ["devices": "\(total)"]) }
        return total
    }
}
