import APNs
import Foundation
import Logging
import ServiceLifecycle
import Store
import Synchronization

/// Drains the outbox: claims batches under a lease (renewed while it works), sends
/// them through the app's `APNsClient` with the apns-id chosen at enqueue time, and
/// records each answer in batches. What an answer means is decided here:
/// - 200: delivered (after a cross-environment retry, the token moves there);
/// - no answer (status 0), or APNs busy through every engine retry (429/500/503):
///   back to the outbox with backoff, not a final entry, until `max_attempts`;
/// - 410: deactivate the token unless it was registered after APNs' timestamp;
/// - DeviceTokenNotForTopic: deactivate now;
/// - BadDeviceToken: once in the other environment (same apns-id), then deactivate;
/// - anything else: failed, the token untouched.
final class OutboxWorker: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clients: APNsClients
    let metrics: ServiceMetrics
    let wakeup: WorkerWakeup
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    /// Each run's workers have their own ids: a lease never outlives its process's claim.
    private let instance = UUID().uuidString.prefix(8).lowercased()
    private let types = Mutex<[String: String]>([:])

    /// How many outcomes are written in one `finish` transaction.
    static let finishBatch = 512

    init(config: ServerConfig, store: any DeliveryStore, clients: APNsClients, metrics: ServiceMetrics,
         wakeup: WorkerWakeup, logger: Logger) {
        self.config = config
        self.store = store
        self.clients = clients
        self.metrics = metrics
        self.wakeup = wakeup
        self.logger = logger
    }

    var leaseMillis: Int64 { Int64(config.worker.leaseSeconds) * 1000 }

    func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<config.worker.concurrency {
                    group.addTask { await self.loop(worker: "\(self.instance)-\(index)") }
                }
            }
        } onGracefulShutdown: {
            // Stop claiming; the batch in hand is sent and recorded before run returns.
            self.stopping.store(true, ordering: .releasing)
            for _ in 0..<self.config.worker.concurrency { self.wakeup.wake() }
        }
        logger.info("outbox worker stopped")
    }

    private var isStopping: Bool { stopping.load(ordering: .acquiring) }

    private func loop(worker: String) async {
        while !isStopping {
            let batch: [ClaimedDelivery]
            do {
                batch = try await store.claim(worker: worker, limit: config.worker.batchSize, leaseMillis: leaseMillis,
                                              now: Clock.nowMillis)
            } catch {
                logger.error("outbox claim failed", metadata: ["error": "\(error)"])
                await wakeup.wait(timeout: .seconds(1))
                continue
            }
            if batch.isEmpty {
                await wakeup.wait(timeout: .milliseconds(config.worker.pollIntervalMillis))
                continue
            }
            await process(batch, worker: worker)
            // A full batch suggests more: let the sibling loops look too.
            if batch.count == config.worker.batchSize { wakeup.wake() }
        }
    }

    /// One claimed batch, sent and recorded; returns when every delivery in it is
    /// finished, released or retried (or its lease was left to expire on a store error).
    func process(_ batch: [ClaimedDelivery], worker: String) async {
        let held = HeldSet(batch.map(\.id))
        let renewal = Task { [store, leaseMillis] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(max(100, leaseMillis / 3)))
                if Task.isCancelled { break }
                let ids = held.snapshot
                if ids.isEmpty { break }
                do {
                    try await store.renew(worker: worker, deliveryIDs: ids, leaseMillis: leaseMillis, now: Clock.nowMillis)
                } catch {
                    self.logger.warning("lease renewal failed", metadata: ["error": "\(error)"])
                }
            }
        }
        defer { renewal.cancel() }

        let sink = OutcomeSink(worker: worker, store: store, metrics: metrics, logger: logger, held: held,
                               config: config.worker, shuttingDown: { [self] in isStopping })
        var groups: [ObjectIdentifier: (APNsClient, [Message<ClaimedDelivery>])] = [:]
        let active = await activeDevices(of: batch)
        for claimed in batch {
            let type = notificationType(claimed)
            // Deactivated (410, logout, moved to another user) since it was enqueued:
            // never sent. The store's claim does not filter these, so the worker does.
            if let active, !active.contains(claimed.delivery.deviceID) {
                await sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                    deliveryID: claimed.id, delivered: false, status: 0, reason: "Inactive", timestamp: Clock.nowMillis,
                    attempts: claimed.attempts)))
                continue
            }
            guard let app = config.app(claimed.appType), let client = clients.byApp[claimed.appType] else {
                await sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                    deliveryID: claimed.id, delivered: false, status: 0, reason: "UnknownApp", timestamp: Clock.nowMillis,
                    attempts: claimed.attempts + 1)))
                continue
            }
            do {
                let notification = try APNs.Notification(
                    topic: app.topic, pushType: PushType(rawValue: claimed.delivery.pushType) ?? .alert,
                    priority: claimed.delivery.priority.flatMap(Priority.init(rawValue:)),
                    expiration: claimed.delivery.expiration.map { .at(unixSeconds: $0) },
                    collapseID: claimed.delivery.collapseID, payload: Payload(json: claimed.delivery.payload))
                let environment: Environment = claimed.delivery.environment == "sandbox" ? .sandbox : .production
                let message = Message(token: claimed.delivery.token, notification: notification, environment: environment,
                                      apnsID: claimed.delivery.apnsID, context: claimed)
                groups[ObjectIdentifier(client), default: (client, [])].1.append(message)
            } catch {
                // Checked at enqueue time: only a config change (topic) can get here.
                await sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                    deliveryID: claimed.id, delivered: false, status: 0, reason: "InvalidMessage",
                    timestamp: Clock.nowMillis, attempts: claimed.attempts + 1)))
            }
        }

        await withTaskGroup(of: Void.self) { group in
            for (client, messages) in groups.values {
                group.addTask {
                    for await r in client.send(messages) {
                        let claimed = r.context
                        if r.result.attempts > 0 { self.metrics.latency.record(r.result.latency) }
                        await sink.add(claimed, type: self.notificationType(claimed),
                                       Self.decide(r.result, claimed, now: Clock.nowMillis))
                    }
                }
            }
        }
        await sink.flush()
        if await sink.retried { wakeup.wake() }
    }

    /// The active iOS device ids of the batch's users for their apps, in one read
    /// per app (the fan-out's own query: `recipients` of those users); nil when the
    /// store cannot say, and then the batch is sent as claimed rather than held up.
    func activeDevices(of batch: [ClaimedDelivery]) async -> Set<Int64>? {
        var usersByApp: [String: Set<String>] = [:]
        for claimed in batch { usersByApp[claimed.appType, default: []].insert(claimed.delivery.userID) }
        var active = Set<Int64>()
        do {
            for (app, users) in usersByApp {
                for recipient in try await store.recipients(appType: app, audience: .users(Array(users))) {
                    for device in recipient.devices { active.insert(device.id) }
                }
            }
        } catch {
            logger.warning("cannot read device states", metadata: ["error": "\(error)"])
            return nil
        }
        return active
    }

    /// What to do with one final answer from the engine.
    enum Decision: Sendable, Equatable {
        case final(DeliveryOutcome)
        /// No final answer: back to the outbox.
        case release(reason: String)
        /// BadDeviceToken, first time: send again in this environment.
        case otherEnvironment(String)
    }

    static func decide(_ result: DeliveryResult, _ claimed: ClaimedDelivery, now: Int64) -> Decision {
        let attempts = claimed.attempts + 1
        let reason = result.reason?.rawValue
        func final(_ delivered: Bool, _ change: DeliveryOutcome.TokenChange? = nil) -> Decision {
            .final(DeliveryOutcome(deliveryID: claimed.id, delivered: delivered, status: result.status,
                                   reason: delivered ? nil : reason, timestamp: result.timestamp ?? now,
                                   attempts: attempts, tokenChange: change))
        }
        switch result.status {
        case 200:
            return final(true, claimed.crossEnvironmentTried ? .moveEnvironment(claimed.delivery.environment) : nil)
        case 0 where result.attempts == 0 && result.reason == .badDeviceToken:
            return final(false)  // malformed locally, never sent (registration checks it: not expected)
        case 0, 429, 500, 503:
            return .release(reason: reason ?? (result.status == 0 ? "NoAnswer" : String(result.status)))
        default:
            switch result.reason {
            case .unregistered?, .expiredToken?:
                return final(false, .deactivate(reason: reason!, registeredBefore: result.timestamp ?? now))
            case .deviceTokenNotForTopic?:
                return final(false, .deactivateNow(reason: reason!))
            case .badDeviceToken?:
                if !claimed.crossEnvironmentTried {
                    return .otherEnvironment(claimed.delivery.environment == "sandbox" ? "production" : "sandbox")
                }
                return final(false, .deactivateNow(reason: reason!))
            default:
                return final(false)
            }
        }
    }

    /// The notification's type, for the metrics' labels: the payload's top-level
    /// "type" (the service wrote it), read once per notification.
    func notificationType(_ claimed: ClaimedDelivery) -> String {
        if let t = types.withLock({ $0[claimed.notificationID] }) { return t }
        let type = (try? JSON.parse(claimed.delivery.payload))?["type"]?.stringValue ?? "other"
        types.withLock { map in
            if map.count > 10_000 { map.removeAll(keepingCapacity: true) }
            map[claimed.notificationID] = type
        }
        return type
    }
}

/// Collects a batch's decisions and writes them: finishes in transactions of up to
/// `OutboxWorker.finishBatch`, releases grouped by their backoff, retries one by one
/// (rare: a BadDeviceToken's first answer).
actor OutcomeSink {
    let worker: String
    let store: any DeliveryStore
    let metrics: ServiceMetrics
    let logger: Logger
    let held: HeldSet
    let config: ServerConfig.WorkerConfig
    let shuttingDown: @Sendable () -> Bool
    private var finishes: [(DeliveryOutcome, app: String, type: String)] = []
    private var releases: [Int64: [Int64]] = [:]  // availableAt → ids
    private(set) var retried = false

    init(worker: String, store: any DeliveryStore, metrics: ServiceMetrics, logger: Logger, held: HeldSet,
         config: ServerConfig.WorkerConfig, shuttingDown: @escaping @Sendable () -> Bool) {
        self.worker = worker
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.held = held
        self.config = config
        self.shuttingDown = shuttingDown
    }

    func add(_ claimed: ClaimedDelivery, type: String, _ decision: OutboxWorker.Decision) async {
        let now = Clock.nowMillis
        switch decision {
        case .final(let outcome):
            finishes.append((outcome, claimed.appType, type))
        case .release(let reason):
            let attempts = claimed.attempts + 1
            if attempts >= config.maxAttempts {
                finishes.append((DeliveryOutcome(deliveryID: claimed.id, delivered: false, status: 0, reason: reason,
                                                 timestamp: now, attempts: attempts), claimed.appType, type))
            } else {
                metrics.released(app: claimed.appType, reason: reason)
                // Going down: the next process should pick these up at once.
                let delay = shuttingDown() ? 0 : Self.backoff(attempts: attempts, config: config)
                releases[now + delay, default: []].append(claimed.id)
            }
        case .otherEnvironment(let environment):
            do {
                try await store.retry(worker: worker, deliveryID: claimed.id, environment: environment, now: now)
                retried = true
            } catch {
                logger.error("outbox retry failed", metadata: ["error": "\(error)"])
            }
            held.remove([claimed.id])
        }
        if finishes.count >= OutboxWorker.finishBatch { await flush() }
    }

    /// base × 2^(attempts-1), capped, with ±25 % jitter so a burst does not return as one.
    static func backoff(attempts: Int, config: ServerConfig.WorkerConfig) -> Int64 {
        let exp = min(attempts - 1, 30)
        let raw = min(Double(config.backoffBaseMillis) * pow(2, Double(exp)), Double(config.backoffMaxMillis))
        return Int64(raw * Double.random(in: 0.75...1.25))
    }

    func flush() async {
        if !finishes.isEmpty {
            let batch = finishes
            finishes.removeAll(keepingCapacity: true)
            do {
                let ignored = try await store.finish(worker: worker, batch.map(\.0), now: Clock.nowMillis)
                if ignored > 0 {
                    logger.warning("outcomes for deliveries whose lease had expired were ignored",
                                   metadata: ["count": "\(ignored)"])
                }
                for (outcome, app, type) in batch {
                    metrics.finished(app: app, type: type, delivered: outcome.delivered, reason: outcome.reason)
                }
            } catch {
                // The leases run out and the deliveries are sent again, with the same apns-ids.
                logger.error("outbox finish failed", metadata: ["error": "\(error)", "count": "\(batch.count)"])
            }
            held.remove(batch.map(\.0.deliveryID))
        }
        if !releases.isEmpty {
            let groups = releases
            releases.removeAll()
            for (availableAt, ids) in groups {
                do {
                    try await store.release(worker: worker, deliveryIDs: ids, availableAt: availableAt, now: Clock.nowMillis)
                } catch {
                    logger.error("outbox release failed", metadata: ["error": "\(error)"])
                }
                held.remove(ids)
            }
        }
    }
}

/// The deliveries of a batch not yet finished, released or retried: the lease
/// renewal extends exactly these.
final class HeldSet: Sendable {
    private let ids: Mutex<Set<Int64>>
    init(_ ids: [Int64]) { self.ids = Mutex(Set(ids)) }
    var snapshot: [Int64] { ids.withLock { Array($0) } }
    func remove(_ done: [Int64]) { ids.withLock { set in for id in done { set.remove(id) } } }
}
