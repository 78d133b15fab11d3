import Synchronization

// Webhook events: what the backend's receivers hear of (a token APNs declared
// dead, a delivery that failed for good, a notification or broadcast that is
// done). An event is written in the same transaction as the change it reports, so
// a change committed is an event committed, whatever happens to the process next;
// a worker sends it later, and again until the receiver takes it (at least once).

/// The events a receiver may ask for.
public enum WebhookEventType: String, CaseIterable, Sendable {
    case tokenDeactivated = "token.deactivated"
    case deliveryFailed = "delivery.failed"
    case notificationCompleted = "notification.completed"
    case broadcastCompleted = "broadcast.completed"
}

/// Which receivers (by URL) want which events: the store writes an event once for
/// each receiver that asked for its type, and none where nobody did.
public struct WebhookRoutes: Sendable, Hashable {
    public struct Endpoint: Sendable, Hashable {
        public var url: String
        public var events: Set<WebhookEventType>
        public init(url: String, events: Set<WebhookEventType>) {
            self.url = url
            self.events = events
        }
    }

    public var endpoints: [Endpoint]

    public init(_ endpoints: [Endpoint] = []) { self.endpoints = endpoints }

    public func urls(for type: WebhookEventType) -> [String] {
        endpoints.filter { $0.events.contains(type) }.map(\.url)
    }

    public var isEmpty: Bool { endpoints.allSatisfy(\.events.isEmpty) }
}

/// The routes a store writes events by; set once at start, read by each transaction
/// that may write one.
final class WebhookRouting: Sendable {
    private let routes = Mutex(WebhookRoutes())
    var current: WebhookRoutes { routes.withLock { $0 } }
    func set(_ new: WebhookRoutes) { routes.withLock { $0 = new } }
}

/// An event claimed for sending.
public struct WebhookEvent: Sendable, Hashable {
    /// The row (the claim's handle).
    public var id: Int64
    /// The id the receiver sees and de-duplicates by (`evt_…`).
    public var eventID: String
    public var endpoint: String
    public var type: String
    /// The event's `data`, a JSON object, as stored.
    public var data: String
    public var createdAt: Int64
    /// Attempts made before this one.
    public var attempts: Int

    public init(id: Int64, eventID: String, endpoint: String, type: String, data: String, createdAt: Int64, attempts: Int) {
        self.id = id
        self.eventID = eventID
        self.endpoint = endpoint
        self.type = type
        self.data = data
        self.createdAt = createdAt
        self.attempts = attempts
    }
}

/// An event as `GET /v1/webhook-events` lists it.
public struct WebhookEventView: Sendable, Hashable {
    public var event: WebhookEvent
    /// pending, delivered or failed.
    public var state: String
    public var lastStatus: Int?
    public var lastError: String?
    public var finishedAt: Int64?
    /// When the next attempt is due (pending ones).
    public var availableAt: Int64
    /// Its place in the list, the next page's cursor.
    public var cursor: Int64

    public init(event: WebhookEvent, state: String, lastStatus: Int?, lastError: String?, finishedAt: Int64?,
                availableAt: Int64, cursor: Int64) {
        self.event = event
        self.state = state
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.finishedAt = finishedAt
        self.availableAt = availableAt
        self.cursor = cursor
    }
}

/// How an attempt to send an event ended.
public enum WebhookAttempt: Sendable, Hashable {
    /// The receiver answered 2xx.
    case delivered(status: Int)
    /// Anything else: tried again from `retryAt`, or failed for good when nil.
    case failed(status: Int?, error: String, retryAt: Int64?)
}

/// How the attempt on one claimed event ended.
public struct WebhookAttemptEnd: Sendable, Hashable {
    /// The event's row.
    public var id: Int64
    public var attempt: WebhookAttempt

    public init(id: Int64, _ attempt: WebhookAttempt) {
        self.id = id
        self.attempt = attempt
    }
}

extension WebhookAttemptEnd {
    /// The ends as the rows both stores update from, one JSON array: each event's
    /// next state, last status and error, when it is due again (a retry; null
    /// otherwise) and when it finished (null while it is still pending).
    static func rows(_ ends: [WebhookAttemptEnd], now: Int64) -> String {
        var out = "["
        for (i, end) in ends.enumerated() {
            if i > 0 { out += "," }
            let state: String, status: Int?, error: String?, availableAt: Int64?, finishedAt: Int64?
            switch end.attempt {
            case .delivered(let s):
                (state, status, error, availableAt, finishedAt) = ("delivered", s, nil, nil, now)
            case .failed(let s, let e, let retryAt?):
                (state, status, error, availableAt, finishedAt) = ("pending", s, e, retryAt, nil)
            case .failed(let s, let e, nil):
                (state, status, error, availableAt, finishedAt) = ("failed", s, e, nil, now)
            }
            out += #"{"id":\#(end.id),"state":"\#(state)","status":\#(status.map(String.init) ?? "null"),"error":"#
            if let error { JSONText.append(error, to: &out) } else { out += "null" }
            out += #","available_at":\#(availableAt.map(String.init) ?? "null")"#
            out += #","finished_at":\#(finishedAt.map(String.init) ?? "null")}"#
        }
        return out + "]"
    }
}

/// The store's side of webhooks (both stores, the same meaning).
public protocol WebhookEventStore: Sendable {
    /// Which receivers want which events, from now on (set at start).
    func routeWebhooks(_ routes: WebhookRoutes)

    /// Claims up to `limit` due pending events whose lease is free or expired, for
    /// `worker`, until `now + leaseMillis`, oldest first.
    func claimWebhookEvents(worker: String, limit: Int, leaseMillis: Int64,
                            now: Int64) async throws(StoreError) -> [WebhookEvent]

    /// Records, in one transaction, how attempts on events this worker holds ended
    /// (an event it no longer holds is left alone): the worker records at once every
    /// send that ended while it waited for the store.
    func finishWebhookEvents(worker: String, _ ends: [WebhookAttemptEnd], now: Int64) async throws(StoreError)

    /// Looks at up to `limit` notifications a finish touched whose check is due: each
    /// with nothing pending any more gets its `notification.completed` events (once);
    /// one still pending is looked at again after `recheckMillis` or its next finish.
    /// Returns how many completed.
    func completeNotifications(limit: Int, recheckMillis: Int64, now: Int64) async throws(StoreError) -> Int

    /// One page of events (of one state, when given), in the order they were written:
    /// at most `limit`, those after the cursor `after`.
    func webhookEvents(state: String?, limit: Int, after: Int64?) async throws(StoreError) -> [WebhookEventView]

    /// Events not delivered, by state (pending, failed).
    func webhookEventCounts() async throws(StoreError) -> [String: Int]

    /// Retention: deletes up to `limit` events finished (delivered or failed) before `cutoff`.
    func pruneWebhookEvents(finishedBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}
