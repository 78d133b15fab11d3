import Logging
import ServiceCore
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
package final class LogPruner: Service, Sendable {
    let retention: ServerConfig.RetentionConfig
    /// `idempotency.retention_hours`.
    let idempotencyRetentionHours: Int
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let logger: Logger

    /// Notifications (and broadcasts) per transaction.
    static let batch = 500

    package init(retention: ServerConfig.RetentionConfig, idempotencyRetentionHours: Int, store: any DeliveryStore,
                 clock: any ServiceClock, metrics: ServiceMetrics, logger: Logger) {
        self.retention = retention
        self.idempotencyRetentionHours = idempotencyRetentionHours
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    package func run() async throws {
        // Idempotency keys always expire (`idempotency.retention_hours`), so it always runs.
        await repeatUntilShutdown(every: .seconds(retention.intervalSeconds)) { await self.pruneOnce() }
    }

    /// Everything due now, a batch at a time; returns the log's total.
    @discardableResult
    func pruneOnce() async -> PruneResult {
        await discardDeadPlans()
        await pruneDevices()
        await pruneIdempotencyKeys()
        guard retention.days > 0 else { return PruneResult() }
        let cutoff = clock.nowMillis - Int64(retention.days) * 86_400_000
        await pruneSchedules(before: cutoff)
        await pruneAudit(before: cutoff)
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

    /// On a shared database, the plans of fan-outs whose instance died while planning
    /// (their mark ran out: see `FanOut`), which no start of that instance may come
    /// to discard. On SQLite the start discarded every one, and there are no others.
    @discardableResult
    func discardDeadPlans() async -> Int {
        guard store.sharedOutbox != nil else { return 0 }
        do {
            let discarded = try await store.discardPlans(before: clock.nowMillis)
            if discarded > 0 { logger.warning("unfinished fan-outs discarded", metadata: ["notifications": "\(discarded)"]) }
            return discarded
        } catch {
            logger.error("discarding unfinished fan-outs failed", metadata: ["error": "\(error)"])
            return 0
        }
    }

    /// Tokens deactivated long enough ago, a batch at a time; how many went.
    @discardableResult
    func pruneDevices() async -> Int {
        guard retention.inactiveDeviceDays > 0 else { return 0 }
        let cutoff = clock.nowMillis - Int64(retention.inactiveDeviceDays) * 86_400_000
        let total = await inBatches("device pruning") { [store] in
            try await store.pruneDevices(inactiveBefore: cutoff, limit: $0)
        }
        if total > 0 { logger.info("inactive devices pruned", metadata: ["devices": "\(total)"]) }
        return total
    }

    /// Idempotency keys older than `idempotency.retention_hours`, a batch at a time;
    /// how many went. (A key past it is void even before it goes: see `IdempotencyGate`.)
    @discardableResult
    func pruneIdempotencyKeys() async -> Int {
        let cutoff = clock.nowMillis - Int64(idempotencyRetentionHours) * 3_600_000
        let total = await inBatches("idempotency key pruning") { [store] in
            try await store.pruneIdempotencyKeys(before: cutoff, limit: $0)
        }
        if total > 0 { logger.info("idempotency keys pruned", metadata: ["keys": "\(total)"]) }
        return total
    }

    /// Scheduled notifications final (sent, cancelled, superseded, failed) before
    /// `cutoff`; a sent one's notification stays in the log by its own retention.
    @discardableResult
    func pruneSchedules(before cutoff: Int64) async -> Int {
        await inBatches("schedule pruning") { [store] in try await store.pruneSchedules(before: cutoff, limit: $0) }
    }

    /// Audit entries recorded before `cutoff`: the audit log is kept as long as the
    /// delivery log.
    @discardableResult
    func pruneAudit(before cutoff: Int64) async -> Int {
        await inBatches("audit log pruning") { [store] in try await store.pruneAudit(before: cutoff, limit: $0) }
    }

    /// `step` (which removes at most the batch it is given and says how many went)
    /// until a step removes less than a batch; the total. A failure is logged, and
    /// the next round tries again.
    private func inBatches(_ what: String, _ step: (Int) async throws -> Int) async -> Int {
        var total = 0
        while !Task.isCancelled {
            do {
                let removed = try await step(Self.batch)
                total += removed
                if removed < Self.batch { break }
            } catch {
                logger.error("\(what) failed", metadata: ["error": "\(error)"])
                break
            }
        }
        return total
    }
}
