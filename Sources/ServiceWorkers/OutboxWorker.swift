import APNs
import Foundation
import Logging
import ServiceCore
import ServiceDelivery
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
/// - a provider key refused for this environment: the operator's configuration, not
///   the device's: the token is kept, the delivery goes back to the outbox with
///   backoff (a corrected key sends it, same apns-id) and `apns_server_key_refused_total`
///   rises for an alert;
/// - anything else: failed, the token untouched.
package final class OutboxWorker: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let clients: APNsClients
    let metrics: ServiceMetrics
    let wakeup: WorkerWakeup
    /// Fresh deliveries from this process's enqueues (nil: a shared outbox, claims only).
    let handoff: Handoff?
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    /// Each run's workers have their own ids: a lease never outlives its process's claim.
    private let instance = UUID().uuidString.prefix(8).lowercased()
    private let types = Mutex<[String: String]>([:])

    /// How many outcomes are written in one `finish` transaction, at most. As large
    /// as a fan-out's part (`worker.fan_out_part`) and more: the single writer
    /// takes the enqueue's parts and the finishes in turn, and with finishes of 2,048
    /// against parts of 5,000 the answers fell behind by half a fan-out and the loop
    /// stalled on its bound of answers not yet recorded. (Smaller finishes, written
    /// whenever the writer was idle, measured worse: the turns stayed one for one.)
    static let finishBatch = 8192
    /// An outcome waits no longer than this for its batch to fill (checked as
    /// answers come), so that a slow trickle of answers is still recorded promptly.
    static let finishWaitMillis: Int64 = 100
    /// Claimed and not yet answered, per loop, at most, in batches: the engine's
    /// window is 2,000 requests, and the next claims are in hand before it drains.
    /// (Answered and not yet recorded: up to `finishesAhead` finish batches more.)
    static let batchesAhead = 4
    /// Answered and not yet recorded, in finish batches: one being written, one
    /// queued behind the writer's other work (a fan-out's part), one being collected.
    static let finishesAhead = 3

    package init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, clients: APNsClients, metrics: ServiceMetrics,
         wakeup: WorkerWakeup, handoff: Handoff?, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.clients = clients
        self.metrics = metrics
        self.wakeup = wakeup
        self.handoff = handoff
        self.logger = logger
    }

    var leaseMillis: Int64 { Int64(config.worker.leaseSeconds) * 1000 }

    package func run() async throws {
        await withGracefulShutdownHandler {
            // On a shared database, another instance's enqueue wakes this one's idle loops.
            let follower = store.sharedOutbox.map { outbox in Task { await self.wakeup.follow(outbox) } }
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<config.worker.concurrency {
                    group.addTask { await self.loop(worker: "\(self.instance)-\(index)") }
                }
            }
            follower?.cancel()
            await follower?.value
        } onGracefulShutdown: {
            self.stop()
        }
        logger.info("outbox worker stopped")
    }

    /// Stop claiming; what is in hand is sent and recorded before `run` returns (and
    /// what no answer comes for is released, once the clients are abandoned).
    package func stop() {
        stopping.store(true, ordering: .releasing)
        for _ in 0..<config.worker.concurrency { wakeup.wake() }
    }

    private var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// One worker: a pipeline rather than batch after batch. It takes batches (handed
    /// over by this process's enqueues, or claimed) while earlier ones are still in
    /// flight (up to `batchesAhead` batches unanswered), sends each as one engine
    /// batch per APNs client (a `Sequence`: no hop per message), and records the
    /// answers in `finishBatch`-sized transactions on a writer task of its own, so
    /// that the results keep flowing while the store writes. Everything held is under
    /// one lease, renewed while held (see `HeldSet.dueForRenewal`).
    private func loop(worker: String) async {
        let held = HeldSet([])
        handoff?.open(worker, held: held)
        let renewal = Task { [store, leaseMillis] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(max(100, leaseMillis / 6)))
                if Task.isCancelled { break }
                let ids = held.dueForRenewal()
                if ids.isEmpty { continue }
                do {
                    try await store.renew(worker: worker, deliveryIDs: ids, leaseMillis: leaseMillis, now: clock.nowMillis)
                } catch {
                    held.renewalFailed(ids)
                    self.logger.warning("lease renewal failed", metadata: ["error": "\(error)"])
                }
            }
        }
        defer { renewal.cancel() }

        let (jobs, jobQueue) = AsyncStream.makeStream(of: OutcomeSink.Job.self)
        let sink = OutcomeSink(worker: worker, clock: clock, metrics: metrics, held: held, config: config.worker, jobs: jobQueue,
                               logger: logger, shuttingDown: { [self] in isStopping })
        let writer = Task { [store, clock, logger, wakeup] in
            for await job in jobs {
                await job.perform(store: store, clock: clock, worker: worker, held: held, wakeup: wakeup, logger: logger)
            }
        }

        let batchSize = config.worker.batchSize
        let highWater = Self.batchesAhead * batchSize
        await withDiscardingTaskGroup { group in
            var notifications = NotificationCache()
            while !isStopping {
                // Keep the engine fed (taken and not yet answered: in flight or queued
                // to send), and memory bounded (held: answered but not yet recorded too;
                // handed over and waiting is held, but not in hand yet).
                let waiting = handoff?.queued(worker) ?? 0
                if sink.unanswered > highWater - batchSize
                    || held.count - waiting > highWater + Self.finishesAhead * Self.finishBatch {
                    try? await Task.sleep(for: .milliseconds(1))
                    continue
                }
                let batch: [ClaimedDelivery]
                if let handed = handoff?.take(worker) {
                    batch = handed
                } else {
                    do {
                        batch = try await store.claim(worker: worker, limit: batchSize, leaseMillis: leaseMillis,
                                                      now: clock.nowMillis)
                    } catch {
                        logger.error("outbox claim failed", metadata: ["error": "\(error)"])
                        await wakeup.wait(timeout: .seconds(1))
                        continue
                    }
                    if batch.isEmpty {
                        // Answers still coming: look again soon (a release may be due);
                        // otherwise sleep until an enqueue wakes us or the poll interval.
                        let poll = config.worker.pollIntervalMillis
                        await wakeup.wait(timeout: .milliseconds(held.count > 0 ? min(20, poll) : poll))
                        continue
                    }
                    held.insert(batch.map(\.id))
                }
                sink.claimed(batch.count)
                notifications.removeAll()
                // One engine batch per APNs client (app) in this batch, in claim order.
                var sends: [ObjectIdentifier: Send] = [:]
                for claimed in batch {
                    let type = notificationType(claimed)
                    // Deactivated (410, logout, moved to another user) since it was
                    // enqueued, as the claim read it: never sent.
                    guard claimed.deviceActive else {
                        sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                            deliveryID: claimed.id, delivered: false, status: 0, reason: "Inactive",
                            timestamp: clock.nowMillis, attempts: claimed.attempts)))
                        continue
                    }
                    guard let app = config.app(claimed.appType), let client = clients.byApp[claimed.appType] else {
                        sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                            deliveryID: claimed.id, delivered: false, status: 0, reason: "UnknownApp",
                            timestamp: clock.nowMillis, attempts: claimed.attempts + 1)))
                        continue
                    }
                    do {
                        let notification = try notifications.notification(
                            for: Self.summarized(claimed, type: type, app: app), topic: app.topic)
                        let environment: Environment = claimed.delivery.environment == "sandbox" ? .sandbox : .production
                        sends[ObjectIdentifier(client), default: Send(client: client)].add(
                            claimed, type: type, notification: notification, environment: environment)
                    } catch {
                        // Checked at enqueue time: only a config change (topic) can get here.
                        sink.add(claimed, type: type, Decision.final(DeliveryOutcome(
                            deliveryID: claimed.id, delivered: false, status: 0, reason: "InvalidMessage",
                            timestamp: clock.nowMillis, attempts: claimed.attempts + 1)))
                    }
                }
                for send in sends.values {
                    group.addTask {
                        // A message that saw no answer (endpoint unreachable) ends the
                        // rest of its batch unsent (status 0): all are released.
                        for await r in send.client.send(send.messages) {
                            let claimed = send.claimed[r.context]
                            if r.result.attempts > 0 { self.metrics.latency.record(r.result.latency) }
                            sink.add(claimed, type: send.types[r.context], Self.decide(r.result, claimed, now: self.clock.nowMillis))
                        }
                    }
                }
                // A full batch suggests more: let the sibling loops look too.
                if batch.count == batchSize { wakeup.wake() }
            }
            // Stopping: no more batches; every one sent gets its answer (the group
            // waits for its sends).
        }
        sink.close()
        await writer.value
        // Handed over and never sent: free for the next process at once, not when
        // the lease runs out.
        if let unsent = handoff?.close(worker).map(\.id), !unsent.isEmpty {
            do {
                try await store.unclaim(worker: worker, deliveryIDs: unsent)
            } catch {
                logger.error("outbox unclaim failed", metadata: ["error": "\(error)", "count": "\(unsent.count)"])
            }
            held.remove(unsent)
        }
    }

    /// One engine batch: its messages carry back their index in `claimed` (a plain
    /// integer: the engine copies a message's context through its generic paths).
    struct Send: Sendable {
        let client: APNsClient
        var messages: [Message<Int>] = []
        var claimed: [ClaimedDelivery] = []
        /// The notification's type of each, for the metrics' labels.
        var types: [String] = []

        init(client: APNsClient) { self.client = client }

        mutating func add(_ delivery: ClaimedDelivery, type: String, notification: APNs.Notification,
                          environment: Environment) {
            messages.append(Message(token: delivery.delivery.token, notification: notification, environment: environment,
                                    apnsID: delivery.delivery.apnsID, context: claimed.count))
            claimed.append(delivery)
            types.append(type)
        }
    }

    /// A coalescing window's send that carries two or more: its alert body becomes the
    /// type's summary (rendered now, from the latest payload and the count the claim
    /// read). Anything else, or a summary that would not fit, goes as it is.
    static func summarized(_ claimed: ClaimedDelivery, type: String, app: AppConfig) -> NewDelivery {
        guard claimed.batched > 1, let template = app.types[type]?.coalesce?.summary,
              let payload = Coalescing.summarize(claimed.delivery.payload, count: claimed.batched, template: template),
              payload.count <= PushType.alert.payloadLimit
        else { return claimed.delivery }
        var delivery = claimed.delivery
        delivery.payload = payload
        return delivery
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
            // A Live Activity's end retires its update token: nothing more can reach the activity.
            if LiveActivitySend.endsActivity(claimed.delivery) { return final(true, .deactivateNow(reason: "ActivityEnded")) }
            return final(true, claimed.crossEnvironmentTried ? .moveEnvironment(claimed.delivery.environment) : nil)
        case 0 where result.attempts == 0 && result.reason == .badDeviceToken:
            return final(false)  // malformed locally, never sent (registration checks it: not expected)
        case 0, 429, 500, 503:
            return .release(reason: reason ?? (result.status == 0 ? "NoAnswer" : String(result.status)))
        default:
            switch result.reason {
            case .badEnvironmentKeyIdInToken?, .badEnvironmentKeyInToken?:
                return .release(reason: reason!)
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

/// Collects the decisions of one worker loop and turns them into store writes,
/// queued to the loop's writer task (so that collecting never waits for SQLite):
/// finishes in transactions of up to `OutboxWorker.finishBatch`, written when that
/// many are collected, when the first has waited `finishWaitMillis`, or when every
/// claimed delivery has its decision; releases
/// grouped by their backoff; retries one by one (rare: a BadDeviceToken's first answer).
/// Called from the loop and from its sends' result tasks: a lock, not an actor, so
/// that a result costs no hop to another executor.
final class OutcomeSink: Sendable {
    let worker: String
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let held: HeldSet
    let config: ServerConfig.WorkerConfig
    let jobs: AsyncStream<Job>.Continuation
    let logger: Logger
    let shuttingDown: @Sendable () -> Bool

    private struct State {
        var finishes: [(DeliveryOutcome, app: String, type: String)] = []
        var releases: [Int64: [Int64]] = [:]  // availableAt → ids
        /// Claimed, and no decision yet.
        var undecided = 0
        /// When the first of `finishes` came.
        var firstFinishAt: Int64 = 0
    }
    private let state = Mutex(State())

    var unanswered: Int { state.withLock { $0.undecided } }

    enum Job: Sendable {
        case finish([(DeliveryOutcome, app: String, type: String)], ServiceMetrics)
        case release(availableAt: Int64, [Int64])
        case retry(Int64, environment: String)

        func perform(store: any DeliveryStore, clock: any ServiceClock, worker: String, held: HeldSet, wakeup: WorkerWakeup,
                     logger: Logger) async {
            switch self {
            case .finish(let batch, let metrics):
                do {
                    let ignored = try await store.finish(worker: worker, batch.map(\.0), now: clock.nowMillis)
                    if ignored > 0 {
                        logger.warning("outcomes for deliveries whose lease had expired were ignored",
                                       metadata: ["count": "\(ignored)"])
                    }
                    // One counter update per label set, not per delivery.
                    var counts: [FinishedKey: Int] = [:]
                    for (outcome, app, type) in batch {
                        counts[FinishedKey(app: app, type: type, delivered: outcome.delivered, reason: outcome.reason),
                               default: 0] += 1
                    }
                    for (key, count) in counts {
                        metrics.finished(app: key.app, type: key.type, delivered: key.delivered, reason: key.reason,
                                         count: count)
                    }
                } catch {
                    // The leases run out and the deliveries are sent again, with the same apns-ids.
                    logger.error("outbox finish failed", metadata: ["error": "\(error)", "count": "\(batch.count)"])
                }
                held.remove(batch.map(\.0.deliveryID))
            case .release(let availableAt, let ids):
                do {
                    try await store.release(worker: worker, deliveryIDs: ids, availableAt: availableAt, now: clock.nowMillis)
                } catch {
                    logger.error("outbox release failed", metadata: ["error": "\(error)"])
                }
                held.remove(ids)
            case .retry(let id, let environment):
                do {
                    try await store.retry(worker: worker, deliveryID: id, environment: environment, now: clock.nowMillis)
                } catch {
                    logger.error("outbox retry failed", metadata: ["error": "\(error)"])
                }
                held.remove([id])
                wakeup.wake()
            }
        }
    }

    struct FinishedKey: Hashable {
        var app: String
        var type: String
        var delivered: Bool
        var reason: String?
    }

    init(worker: String, clock: any ServiceClock, metrics: ServiceMetrics, held: HeldSet, config: ServerConfig.WorkerConfig,
         jobs: AsyncStream<Job>.Continuation, logger: Logger, shuttingDown: @escaping @Sendable () -> Bool) {
        self.worker = worker
        self.clock = clock
        self.metrics = metrics
        self.held = held
        self.config = config
        self.jobs = jobs
        self.logger = logger
        self.shuttingDown = shuttingDown
    }

    /// `count` more deliveries claimed, each to get one `add`.
    func claimed(_ count: Int) { state.withLock { $0.undecided += count } }

    func add(_ claimed: ClaimedDelivery, type: String, _ decision: OutboxWorker.Decision) {
        let now = clock.nowMillis
        // Decided outside the lock: the metric and the backoff's clock read.
        var release: (availableAt: Int64, id: Int64)?
        var outcome: (DeliveryOutcome, app: String, type: String)?
        switch decision {
        case .final(let final):
            outcome = (final, claimed.appType, type)
        case .release(let reason):
            if Self.keyRefusals.contains(reason) {
                metrics.keyRefused(app: claimed.appType, reason: reason)
                logger.error("APNs refused the app's provider key for this environment",
                             metadata: Self.fields(claimed, reason: reason))
            }
            let attempts = claimed.attempts + 1
            if attempts >= config.maxAttempts {
                outcome = (DeliveryOutcome(deliveryID: claimed.id, delivered: false, status: 0, reason: reason,
                                           timestamp: now, attempts: attempts), claimed.appType, type)
            } else {
                metrics.released(app: claimed.appType, reason: reason)
                logger.debug("delivery put back in the outbox", metadata: Self.fields(claimed, reason: reason))
                // Going down: the next process should pick these up at once.
                let delay = shuttingDown() ? 0 : Self.backoff(attempts: attempts, config: config)
                release = (now + delay, claimed.id)
            }
        case .otherEnvironment(let environment):
            jobs.yield(.retry(claimed.id, environment: environment))
        }
        if let final = outcome?.0 {
            if final.delivered {
                logger.debug("delivered", metadata: Self.fields(claimed, reason: nil))
            } else {
                var fields = Self.fields(claimed, reason: final.reason ?? "Unknown")
                fields["status"] = "\(final.status)"
                logger.info("delivery failed", metadata: fields)
            }
        }
        state.withLock { s in
            s.undecided -= 1
            if let outcome {
                if s.finishes.isEmpty { s.firstFinishAt = now }
                s.finishes.append(outcome)
            }
            if let release { s.releases[release.availableAt, default: []].append(release.id) }
            if s.finishes.count >= OutboxWorker.finishBatch || s.undecided == 0
                || (!s.finishes.isEmpty && now - s.firstFinishAt >= OutboxWorker.finishWaitMillis) {
                flush(&s)
            }
        }
    }

    /// A delivery's fields in the log (never its token or its payload).
    static func fields(_ claimed: ClaimedDelivery, reason: String?) -> Logger.Metadata {
        var fields: Logger.Metadata = ["notification_id": "\(claimed.notificationID)",
                                       "apns_id": "\(claimed.delivery.apnsID)", "app": "\(claimed.appType)"]
        if let reason { fields["reason"] = "\(reason)" }
        return fields
    }

    /// Answers that refuse the provider key itself for this environment: every
    /// delivery signed with it fails alike until the configuration is fixed.
    static let keyRefusals: Set<String> = ["BadEnvironmentKeyIdInToken", "BadEnvironmentKeyInToken"]

    /// base × 2^(attempts-1), capped, with ±25 % jitter so a burst does not return as one.
    static func backoff(attempts: Int, config: ServerConfig.WorkerConfig) -> Int64 {
        let exp = min(attempts - 1, 30)
        let raw = min(Double(config.backoffBaseMillis) * pow(2, Double(exp)), Double(config.backoffMaxMillis))
        return Int64(raw * Double.random(in: 0.75...1.25))
    }

    /// Under the lock, so that jobs are queued in the order their outcomes came.
    private func flush(_ s: inout State) {
        if !s.finishes.isEmpty {
            jobs.yield(.finish(s.finishes, metrics))
            s.finishes.removeAll(keepingCapacity: true)
        }
        for (availableAt, ids) in s.releases { jobs.yield(.release(availableAt: availableAt, ids)) }
        s.releases.removeAll()
    }

    /// Writes what is left; the writer ends after it.
    func close() {
        state.withLock { flush(&$0) }
        jobs.finish()
    }
}

/// Builds each distinct notification once per claimed batch, for every delivery
/// that shares it. The payload is taken as stored, not read through again: every
/// stored payload is one the service wrote itself, compact, with `JSON` or
/// `Payload(aps:)` (and a coalesced summary is written the same way).
struct NotificationCache {
    struct Key: Hashable {
        var payload: [UInt8]
        var topic: String
        var pushType: String
        var priority: Int?
        var collapseID: String?
        var expiration: Int64?
    }
    private var made: [Key: APNs.Notification] = [:]
    /// The claim shares one payload array between neighbours: == on it is an
    /// identity check, no hashing.
    private var last: (Key, APNs.Notification)?

    mutating func removeAll() {
        made.removeAll(keepingCapacity: true)
        last = nil
    }

    mutating func notification(for d: NewDelivery, topic: String) throws -> APNs.Notification {
        let key = Key(payload: d.payload, topic: topic, pushType: d.pushType, priority: d.priority,
                      collapseID: d.collapseID, expiration: d.expiration)
        if let last, last.0 == key { return last.1 }
        if let n = made[key] {
            last = (key, n)
            return n
        }
        let n = try APNs.Notification(
            topic: topic, pushType: PushType(rawValue: d.pushType) ?? .alert,
            priority: d.priority.flatMap(Priority.init(rawValue:)),
            expiration: d.expiration.map { .at(unixSeconds: $0) },
            collapseID: d.collapseID, payload: Payload(compactObject: d.payload))
        made[key] = n
        last = (key, n)
        return n
    }
}

/// The deliveries a worker loop has claimed and not yet finished, released or
/// retried: the lease renewal extends exactly these, and their count holds the
/// claiming back.
///
/// Two generations, by when their lease was last set: `fresh` since the last renewal
/// tick, `aging` before it. A tick renews the aging only (their lease is then at most
/// two ticks old). With ticks a sixth of a lease apart, no row ever has less than
/// two thirds of its lease left, as when every tick a third apart renewed every
/// row; but a fan-out handed over and drained within a sixth of a lease is never
/// rewritten. (Renewing all 100k rows of one under the single SQLite writer held
/// its finishes up for 150 ms or more, at a random point of the drain.)
final class HeldSet: Sendable {
    private struct Generations {
        var fresh: Set<Int64>
        var aging: Set<Int64> = []
    }
    private let ids: Mutex<Generations>
    init(_ ids: [Int64]) { self.ids = Mutex(Generations(fresh: Set(ids))) }
    var count: Int { ids.withLock { $0.fresh.count + $0.aging.count } }
    func insert(_ new: [Int64]) { ids.withLock { g in for id in new { g.fresh.insert(id) } } }
    func remove(_ done: [Int64]) {
        ids.withLock { g in
            for id in done where g.fresh.remove(id) == nil { g.aging.remove(id) }
        }
    }

    /// At a renewal tick: the ids to renew now, counted as fresh from here on.
    func dueForRenewal() -> [Int64] {
        ids.withLock { g in
            let due = g.aging
            g.aging = g.fresh
            g.fresh = due
            return Array(due)
        }
    }

    /// A renewal that did not happen: those still held are due at the next tick.
    func renewalFailed(_ ids: [Int64]) {
        self.ids.withLock { g in
            for id in ids where g.fresh.remove(id) != nil { g.aging.insert(id) }
        }
    }
}
