import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import ServiceCore
import ServiceDelivery
import ServiceLifecycle
import Store
import Synchronization

/// Sends the webhook events the store wrote (see `WebhookEventStore`) to their
/// receivers, signed (`WebhookSignature`), until each answers 2xx: at least once, an
/// event being sent again when an answer is lost or the process dies mid-send. A
/// failed attempt is tried again after a backoff, for `webhooks.retry_hours`; then
/// the event is `failed`.
///
/// Apart from the APNs path on purpose: its own HTTP client, its own concurrency
/// (`webhooks.concurrency` events in flight) and bounded attempts
/// (`webhooks.timeout_ms`, the whole attempt: the client's own timeouts end when the
/// answer's head arrives, and a receiver that then trickles its body would hold the
/// slot past the claim's lease, be claimed again, and at last hold every slot), so
/// a receiver that is slow, down or failing delays only its own events, never a
/// send to APNs. A shutdown waits for the sends in flight no longer than its grace
/// (`stop`): those cut short go again.
///
/// It also looks at notifications a finish touched for `notification.completed`,
/// and prunes old events and device reports with the log's retention.
package final class WebhookWorker: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let logger: Logger
    let workerID = "webhooks-\(UUID().uuidString.prefix(8).lowercased())"

    /// Events claimed whose send has not ended, by id: one is never sent twice at
    /// once, even should its lease run out and a claim return it again.
    private let inFlight = Mutex(Set<Int64>())
    /// Set when the shutdown's grace is over: the sends in flight are cancelled.
    private let stopped = Mutex(false)
    /// Sends that ended, not yet recorded: the loop records them all in one write.
    private let ended = Mutex<[WebhookAttemptEnd]>([])
    /// Woken as each send ends, so that the loop records it and a busy worker
    /// claims the next event at once rather than a poll interval later.
    private let sendEnded = WorkerWakeup()

    package init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    var settings: WebhookConfig { config.webhooks }

    package func run() async throws {
        store.routeWebhooks(settings.routes)
        guard !settings.endpoints.isEmpty else {
            // Nothing to send; device reports still age out with the log.
            await repeatUntilShutdown(every: .seconds(config.retention.intervalSeconds)) { await self.prune() }
            return
        }
        let timeout = TimeAmount.milliseconds(Int64(settings.timeoutMillis))
        let client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: .init(redirectConfiguration: .disallow,
                                 timeout: .init(connect: timeout, read: timeout, write: timeout)))
        await withDiscardingTaskGroup { group in
            var lastPrune = ContinuousClock.now - .seconds(86_400)
            var lastGauge = ContinuousClock.now - .seconds(86_400)
            var lastCompletion = ContinuousClock.now - .seconds(86_400)
            var lastClaim = ContinuousClock.now - .seconds(86_400)
            var lastClaimFull = false
            let poll = Duration.milliseconds(settings.pollIntervalMillis)
            // Waits at most a poll, so that a shutdown is heard within one; the group
            // then waits for the sends in flight, until the grace is over (`stop`).
            while !Task.isCancelled && !Task.isShuttingDownGracefully && !stopped.withLock({ $0 }) {
                let now = ContinuousClock.now
                if now - lastPrune >= .seconds(config.retention.intervalSeconds) {
                    lastPrune = now
                    await prune()
                }
                if now - lastGauge >= .milliseconds(config.metricsRefreshMillis) {
                    lastGauge = now
                    if let counts = try? await store.webhookEventCounts() { metrics.webhookEvents(counts) }
                }
                if now - lastCompletion >= poll {
                    lastCompletion = now
                    await completeNotifications()
                }
                // Every send that ended while the store was busy is recorded in one
                // write, and the freed slots are claimed again in one more: under
                // load the writes grow by the events they carry, not in number.
                await recordEnded()
                // More may be due at once after a claim that filled every free slot;
                // after one that found fewer, not before the next poll.
                let free = settings.concurrency - inFlight.withLock { $0.count }
                if free > 0, lastClaimFull || now - lastClaim >= poll {
                    lastClaim = now
                    let claimed = await claim(limit: free)
                    lastClaimFull = claimed.count == free
                    for event in claimed {
                        group.addTask { await self.send(event, client: client) }
                    }
                    if lastClaimFull { continue }
                }
                await sendEnded.wait(timeout: poll)
            }
            // Each send ends within timeout_ms; past the shutdown's grace, at once.
            while !inFlight.withLock({ $0.isEmpty }) && !stopped.withLock({ $0 }) {
                await sendEnded.wait(timeout: poll)
            }
            group.cancelAll()
        }
        // Every send has ended: the last ones recorded.
        await recordEnded()
        try? await client.shutdown()
    }

    /// The shutdown's grace is over: the sends in flight end now (as failed attempts,
    /// tried again after their backoff, by this process's successor).
    package func stop() {
        stopped.withLock { $0 = true }
        sendEnded.wake()
    }

    /// Records the sends that ended since the last call. Should the write fail,
    /// their leases run out and the events go again (at least once).
    private func recordEnded() async {
        let ends = ended.withLock { e -> [WebhookAttemptEnd] in defer { e.removeAll() }; return e }
        guard !ends.isEmpty else { return }
        do {
            try await store.finishWebhookEvents(worker: workerID, ends, now: clock.nowMillis)
        } catch {
            logger.error("recording webhook attempts failed", metadata: ["error": "\(error)"])
        }
    }

    /// Up to `limit` due events (the free share of `concurrency`), counted in flight.
    private func claim(limit free: Int) async -> [WebhookEvent] {
        // Long enough for an attempt and its finish; a dead process's claims expire.
        let lease = Int64(settings.timeoutMillis) * 2 + 30_000
        do {
            let claimed = try await store.claimWebhookEvents(worker: workerID, limit: free, leaseMillis: lease,
                                                             now: clock.nowMillis)
            // One whose send has not ended (its lease ran out while the store was
            // slow to record it) stays with that send, which records it.
            return inFlight.withLock { ids in claimed.filter { ids.insert($0.id).inserted } }
        } catch {
            logger.error("claiming webhook events failed", metadata: ["error": "\(error)"])
            return []
        }
    }

    private func completeNotifications() async {
        guard !settings.routes.urls(for: .notificationCompleted).isEmpty else { return }
        do {
            _ = try await store.completeNotifications(limit: 200, recheckMillis: 10_000, now: clock.nowMillis)
        } catch {
            logger.error("checking notifications for completion failed", metadata: ["error": "\(error)"])
        }
    }

    /// The body a receiver gets: the event's id, type, time and data.
    static func body(_ event: WebhookEvent) -> [UInt8] {
        // The id and type are ours (evt_ and hex, a known type name): no escaping needed.
        Array(#"{"id":"\#(event.eventID)","type":"\#(event.type)","created_at":"\#(Timestamp.iso8601(millis: event.createdAt))","data":\#(event.data)}"#.utf8)
    }

    /// One attempt; its end is left for the loop to record.
    private func send(_ event: WebhookEvent, client: HTTPClient) async {
        let attempt: WebhookAttempt
        if let endpoint = settings.endpoint(event.endpoint) {
            attempt = await post(event, to: endpoint, client: client)
        } else {
            attempt = .failed(status: nil, error: "the receiver is no longer in the config", retryAt: nil)
        }
        let outcome: String
        switch attempt {
        case .delivered: outcome = "delivered"
        case .failed(_, _, .some): outcome = "retry"
        case .failed(_, _, nil): outcome = "failed"
        }
        metrics.webhookDelivery(event: event.type, outcome: outcome)
        if case .failed(let status, let error, let retryAt) = attempt {
            logger.log(level: retryAt == nil ? .error : .info, "webhook attempt failed",
                       metadata: ["event": "\(event.eventID)", "type": "\(event.type)",
                                  "url": "\(WebhookDestination.redacted(event.endpoint))",
                                  "status": "\(status.map(String.init) ?? "none")", "error": "\(error)",
                                  "final": "\(retryAt == nil)"])
        }
        ended.withLock { $0.append(WebhookAttemptEnd(id: event.id, attempt)) }
        inFlight.withLock { _ = $0.remove(event.id) }
        sendEnded.wake()
    }

    private func post(_ event: WebhookEvent, to endpoint: WebhookConfig.Endpoint, client: HTTPClient) async -> WebhookAttempt {
        let body = Self.body(event)
        var request = HTTPClientRequest(url: endpoint.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "apns-server/\(apnsServerVersion)")
        request.headers.add(name: "APNs-Server-Event-Id", value: event.eventID)
        request.headers.add(name: "APNs-Server-Event-Type", value: event.type)
        request.headers.add(name: WebhookSignature.header,
                            value: WebhookSignature.value(secret: endpoint.secret, timestamp: clock.nowSeconds, body: body))
        request.body = .bytes(ByteBuffer(bytes: body))
        let timeout = settings.timeoutMillis
        let sending = request
        let (host, allowPrivate) = (endpoint.host, settings.allowPrivateNetworks)
        // The status as soon as the head arrives: a receiver that answered and then
        // stalls in its body has answered.
        let status = HeadStatus()
        do {
            try await Self.within(.milliseconds(timeout)) {
                if let why = await Self.refusal(host: host, allowPrivate: allowPrivate) { throw Refused(why: why) }
                let response = try await client.execute(sending, timeout: .milliseconds(Int64(timeout)))
                status.code.withLock { $0 = Int(response.status.code) }
                // Read (a little of) the answer so the connection can be used again.
                _ = try await response.body.collect(upTo: 64 * 1024)
            }
        } catch {
            if status.code.withLock({ $0 }) == nil {
                let why = switch error {
                case let refused as Refused: refused.why
                case is TimedOut: "no answer within timeout_ms (\(timeout))"
                case is CancellationError: "cut short by a shutdown before the receiver answered"
                default: "\(error)"
                }
                return .failed(status: nil, error: why, retryAt: retryAt(event))
            }
        }
        let code = status.code.withLock { $0 } ?? 0
        if (200..<300).contains(code) { return .delivered(status: code) }
        return .failed(status: code, error: "HTTP \(code)", retryAt: retryAt(event))
    }

    private final class HeadStatus: Sendable { let code = Mutex<Int?>(nil) }
    private struct TimedOut: Error {}
    private struct Refused: Error { let why: String }

    /// `body`, cancelled (and `TimedOut` thrown) once `limit` has passed.
    static func within(_ limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask { try await body(); return true }
            group.addTask { try await Task.sleep(for: limit); return false }
            defer { group.cancelAll() }
            guard try await group.next() == true else { throw TimedOut() }
        }
    }

    /// Why the receiver's host may not be sent to as it resolves now, or nil (nil
    /// too when it does not resolve: the client's own error says so).
    static func refusal(host: String, allowPrivate: Bool) async -> String? {
        guard WebhookDestination.literal(host) == nil else {
            // An address was judged at load.
            return nil
        }
        // getaddrinfo blocks: on a thread of its own, not the cooperative pool.
        let addresses = await withCheckedContinuation { (c: CheckedContinuation<[String]?, Never>) in
            DispatchQueue.global().async { c.resume(returning: WebhookDestination.resolve(host)) }
        }
        return addresses.flatMap { WebhookDestination.refusal(host: host, addresses: $0, allowPrivate: allowPrivate) }
    }

    /// When attempt `attempts + 2` may go: base × 2^attempts, capped; nil once past
    /// the retry period (counted from the event's creation).
    func retryAt(_ event: WebhookEvent) -> Int64? {
        let now = clock.nowMillis
        let exponent = min(event.attempts, 30)
        let backoff = min(Int64(settings.backoffMaxMillis), Int64(settings.backoffBaseMillis) << exponent)
        let next = now + backoff
        let end = event.createdAt + Int64(settings.retryHours) * 3_600_000
        return next <= end ? next : nil
    }

    /// Events and device reports older than the log's retention.
    private func prune() async {
        guard config.retention.days > 0 else { return }
        let cutoff = clock.nowMillis - Int64(config.retention.days) * 86_400_000
        do {
            while try await store.pruneWebhookEvents(finishedBefore: cutoff, limit: 500) == 500, !Task.isCancelled {}
            while try await store.pruneNotificationEvents(before: cutoff, limit: 500) == 500, !Task.isCancelled {}
        } catch {
            logger.error("pruning webhook events failed", metadata: ["error": "\(error)"])
        }
    }
}
