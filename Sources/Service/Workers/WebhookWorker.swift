import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
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
/// (`webhooks.timeout_ms`), so a receiver that is slow, down or failing delays only
/// its own events, never a send to APNs.
///
/// It also looks at notifications a finish touched for `notification.completed`,
/// and prunes old events and device reports with the log's retention.
final class WebhookWorker: Service, Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    let logger: Logger
    let workerID = "webhooks-\(UUID().uuidString.prefix(8).lowercased())"

    /// Events claimed whose send has not ended.
    private let inFlight = Mutex(0)
    /// Sends that ended, not yet recorded: the loop records them all in one write.
    private let ended = Mutex<[WebhookAttemptEnd]>([])
    /// Woken as each send ends, so that the loop records it and a busy worker
    /// claims the next event at once rather than a poll interval later.
    private let sendEnded = WorkerWakeup()

    init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics, logger: Logger) {
        self.config = config
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
    }

    var settings: WebhookConfig { config.webhooks }

    func run() async throws {
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
            // then waits for the sends in flight.
            while !Task.isCancelled && !Task.isShuttingDownGracefully {
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
                let free = settings.concurrency - inFlight.withLock { $0 }
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
        }
        // Every send has ended (each is bounded by the timeout): the last ones recorded.
        await recordEnded()
        try? await client.shutdown()
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
            inFlight.withLock { $0 += claimed.count }
            return claimed
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
                       metadata: ["event": "\(event.eventID)", "type": "\(event.type)", "url": "\(event.endpoint)",
                                  "status": "\(status.map(String.init) ?? "none")", "error": "\(error)",
                                  "final": "\(retryAt == nil)"])
        }
        ended.withLock { $0.append(WebhookAttemptEnd(id: event.id, attempt)) }
        inFlight.withLock { $0 -= 1 }
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
        do {
            let response = try await client.execute(request, timeout: .milliseconds(Int64(settings.timeoutMillis)))
            // Read (a little of) the answer so the connection can be used again.
            _ = try? await response.body.collect(upTo: 64 * 1024)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .delivered(status: status) }
            return .failed(status: status, error: "HTTP \(status)", retryAt: retryAt(event))
        } catch {
            return .failed(status: nil, error: "\(error)", retryAt: retryAt(event))
        }
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
