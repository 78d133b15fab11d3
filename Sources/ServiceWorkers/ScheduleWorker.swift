import Foundation
import Logging
import ServiceCore
import ServiceDelivery
import ServiceLifecycle
import Store

/// Fans out scheduled notifications (`Scheduling`) when they are due: each is
/// claimed under a lease, its stored request checked and fanned out as
/// `POST /v1/notifications` (or `/v1/live-activities`) would do it now, under the
/// schedule's id, then marked `sent`.
///
/// Once only: the notification's id is the schedule's, and its primary key commits
/// with its deliveries. A worker that died after the fan-out but before marking it
/// leaves a schedule whose notification exists: the next claim (once the lease
/// runs out) only marks it.
package final class ScheduleWorker: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let fanOut: FanOut
    /// The outbox worker's: fresh deliveries are due at once.
    let outbox: WorkerWakeup
    let logger: Logger
    private let pause = WorkerWakeup()
    private let worker = "schedule-" + UUID().uuidString.prefix(8).lowercased()
    private let stopping = StopFlag()
    static let batch = 16

    package init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics,
         outbox: WorkerWakeup, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.fanOut = FanOut(config: config, store: store, clock: clock, metrics: metrics)
        self.outbox = outbox
        self.logger = logger
    }

    var leaseMillis: Int64 { Int64(config.worker.leaseSeconds) * 1000 }

    package func run() async throws {
        // The poll interval is the lateness a send may have past its time.
        await claimLoop("schedule", stopping: stopping, wakeup: pause,
                        poll: .milliseconds(config.worker.pollIntervalMillis), logger: logger) {
            try await store.claimDueSchedules(worker: worker, limit: Self.batch, leaseMillis: leaseMillis,
                                              now: clock.nowMillis)
        } handle: { claimed in
            for row in claimed { await send(row) }
        }
    }

    func send(_ row: ScheduleRow) async {
        let s = row.schedule
        do {
            // A worker that died while planning it made nothing that stands.
            try await fanOut.discardDeadPlan(s.id)
            if try await store.notification(id: s.id, limit: 1, after: nil) == nil {
                let body: JSON
                do { body = try JSON.parse(s.request) } catch { throw RequestError.invalid("the stored request: \(error)") }
                let deliveries: Int
                switch s.kind {
                case "live_activity":
                    let sender = LiveActivitySend(config: config, store: store, clock: clock)
                    deliveries = try await sender.run(try sender.parse(body), notificationID: s.id).deliveries
                default:
                    deliveries = try await fanOut.run(try fanOut.parse(body), notificationID: s.id).deliveries
                }
                if deliveries > 0 { outbox.wake() }
            }
            _ = try await store.finishSchedule(id: s.id, worker: worker, state: "sent", error: nil, now: clock.nowMillis)
        } catch let refused as RequestError {
            // Checked when posted, refused now: the config changed meanwhile (an app
            // or type gone). Sending it later would not change that.
            logger.warning("scheduled notification refused at send time",
                           metadata: ["notification_id": "\(s.id)", "error": "\(refused.message)"])
            _ = try? await store.finishSchedule(id: s.id, worker: worker, state: "failed", error: refused.message,
                                                now: clock.nowMillis)
        } catch {
            // The store failed: the lease runs out and a claim tries it again.
            logger.error("scheduled notification failed", metadata: ["notification_id": "\(s.id)", "error": "\(error)"])
        }
    }
}
