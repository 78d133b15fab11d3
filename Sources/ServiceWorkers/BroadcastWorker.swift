import APNs
import Foundation
import Logging
import ServiceCore
import ServiceDelivery
import ServiceLifecycle
import Store

/// Sends the broadcasts recorded in the store's `broadcasts` table, each under a
/// lease, and writes its one final entry (status, reason, apns-request-id,
/// apns-unique-id). A small outbox of its own rather than rows in the device
/// outbox: a broadcast has no device token and no apns-id of ours, its answer
/// carries other ids, it changes no token, and broadcasts are few, so they should
/// not share the claim path tuned for 100k-token fan-outs.
///
/// After a crash a pending broadcast is claimed again once its lease runs out and
/// is sent then: at least once, and recorded exactly once.
package final class BroadcastWorker: Service, Sendable {
    let config: ServerConfig.WorkerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let broadcasts: Broadcasts
    let wakeup: WorkerWakeup
    let logger: Logger
    private let worker = "broadcast-" + UUID().uuidString.prefix(8).lowercased()
    private let stopping = StopFlag()
    /// Broadcasts claimed per round.
    static let batch = 16

    package init(config: ServerConfig.WorkerConfig, store: any DeliveryStore, clock: any ServiceClock, broadcasts: Broadcasts, wakeup: WorkerWakeup, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.broadcasts = broadcasts
        self.wakeup = wakeup
        self.logger = logger
    }

    var leaseMillis: Int64 { Int64(config.leaseSeconds) * 1000 }

    package func run() async throws {
        await claimLoop("broadcast", stopping: stopping, wakeup: wakeup,
                        poll: .milliseconds(config.pollIntervalMillis), logger: logger) {
            try await store.claimBroadcasts(worker: worker, limit: Self.batch, leaseMillis: leaseMillis,
                                            now: clock.nowMillis)
        } handle: { claimed in
            // A round's broadcasts at once: each is one request, answered in parallel.
            // The engine's retries can outlast a lease: it is renewed until the round ends.
            let renewal = Task { [store, worker, leaseMillis, logger] in
                let ids = claimed.map(\.broadcast.id)
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(max(100, leaseMillis / 3)))
                    if Task.isCancelled { break }
                    do {
                        try await store.renewBroadcasts(worker: worker, ids: ids, leaseMillis: leaseMillis,
                                                        now: clock.nowMillis)
                    } catch {
                        logger.warning("broadcast lease renewal failed", metadata: ["error": "\(error)"])
                    }
                }
            }
            await withTaskGroup(of: Void.self) { group in
                for c in claimed { group.addTask { await self.send(c) } }
            }
            renewal.cancel()
        }
        logger.info("broadcast worker stopped")
    }

    private func send(_ claimed: ClaimedBroadcast) async {
        let b = claimed.broadcast
        let attempts = claimed.attempts + 1
        let now = { [clock] in clock.nowMillis }
        guard let client = broadcasts.client(appType: b.channel.key.appType, environment: b.channel.key.environment) else {
            await finish(BroadcastOutcome(id: b.id, delivered: false, status: 0, reason: "UnknownApp", requestID: nil,
                                          uniqueID: nil, attempts: attempts))
            return
        }
        let notification: BroadcastNotification
        do {
            notification = try BroadcastNotification(
                priority: b.priority.flatMap(Priority.init(rawValue:)),
                expiration: b.expiration == 0 ? .immediately : .at(unixSeconds: b.expiration),
                payload: Payload(compactObject: b.payload))
        } catch {
            // Checked when it was recorded: not expected.
            await finish(BroadcastOutcome(id: b.id, delivered: false, status: 0, reason: "InvalidMessage",
                                          requestID: nil, uniqueID: nil, attempts: attempts))
            return
        }
        let result = await client.send(notification, on: b.channel.channelID)
        switch result.status {
        case 0 where result.attempts > 0 || result.reason == nil, 429, 500, 503:
            // No final answer: again later, until max_attempts.
            guard attempts < config.maxAttempts else { break }
            let delay = stopping.isSet ? 0 : OutcomeSink.backoff(attempts: attempts, config: config)
            do {
                try await store.releaseBroadcast(worker: worker, id: b.id, availableAt: now() + delay, now: now())
            } catch {
                logger.error("broadcast release failed", metadata: ["error": "\(error)"])
            }
            return
        default:
            break
        }
        let reason = result.reason?.rawValue ?? (result.status == 0 ? "NoAnswer" : nil)
        await finish(BroadcastOutcome(id: b.id, delivered: result.status == 200, status: result.status,
                                      reason: result.status == 200 ? nil : reason, requestID: result.apnsID,
                                      uniqueID: result.uniqueID, attempts: attempts))
    }

    private func finish(_ outcome: BroadcastOutcome) async {
        do {
            if try await !store.finishBroadcast(worker: worker, outcome, now: clock.nowMillis) {
                logger.warning("a broadcast's outcome came after its lease went to another worker",
                               metadata: ["broadcast": "\(outcome.id)"])
            }
        } catch {
            // The lease runs out and it is sent again.
            logger.error("broadcast finish failed", metadata: ["error": "\(error)"])
        }
    }
}
