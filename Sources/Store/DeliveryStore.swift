/// The service's memory, composed of one contract per concern: the device
/// registry, preferences, the outbox and its claims, the delivery log, retention,
/// Live Activity tokens and broadcast channels. SQLite (one instance) and PostgreSQL
/// (several instances) each serve the whole of it, so the service runs on either.
/// The store knows nothing of HTTP or APNs: the service decides policy (who gets
/// what, what a 410 means) and asks the store to record it.
///
/// Every method is one transaction. Times are milliseconds since 1970 (UTC), passed
/// in by the caller so that tests control the clock.
///
/// What differs by engine is a capability the contract names, never a type the
/// service checks: `sharedOutbox` (other instances enqueue into the same outbox).
public protocol DeliveryStore: DeviceRegistry, PreferenceStore, OutboxStore, DeliveryLogStore, RetentionStore,
                               LiveActivityStore, ChannelStore,
                               IdempotencyKeys, ScheduledSends, DeliveryCancellation, WebhookEventStore,
                               NotificationEventStore, SupportViewStore, WaitViewStore, FanOutPlans, AuditLogStore {
    /// Creates or upgrades the schema (versioned, idempotent, safe when several
    /// instances start at once).
    func migrate() async throws(StoreError)

    /// Ends the store's connections; calls made after it fail.
    func close() async

    /// Proves the store is reachable with these settings, changing nothing: what
    /// `apns-server --check-config` asks before a start would migrate.
    func checkConnection() async throws(StoreError)

    /// Where other instances share this store's outbox: how to hear of their
    /// enqueues (see `SharedOutbox`). Nil where this process is the only writer.
    var sharedOutbox: (any SharedOutbox)? { get }
}

/// The outbox and its claims: a notification's recipients and deliveries go in (a
/// delivery with a `Hold` waits in its device's window), workers claim them under a
/// lease, and each leaves with one final outcome.
public protocol OutboxStore: Sendable {
    /// The users a notification targets, each with their saved preferences for the app
    /// and their active iOS tokens of that app: by user ids, or by company (every user
    /// with an active token of the app whose company is `companyID`).
    func recipients(appType: String, audience: Audience) async throws(StoreError) -> [Recipient]

    /// Records a notification and its deliveries, each pending in the outbox, in one
    /// transaction: when this returns, they are committed (the 202 may be sent).
    /// A delivery with `notBefore` waits in the outbox until then; one with a `hold`
    /// joins its device's open window for the hold's key (see `Hold`).
    ///
    /// With `lease`, when every delivery is due now (none held), they are claimed for
    /// `lease.worker` in the same transaction and returned as a claim returns them:
    /// the enqueuing process sends them at once, without a claim query per batch.
    /// Otherwise (or without a lease) they wait in the outbox for any worker's claim,
    /// and the result is empty.
    func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery], now: Int64,
                 lease: OutboxLease?) async throws(StoreError) -> [ClaimedDelivery]

    /// Claims up to `limit` due pending deliveries (`notBefore` passed) whose lease is
    /// free or expired, for `worker`, until `now + leaseMillis`, oldest first. A delivery is never held by two
    /// workers at once. Each says whether its device is still what it was at enqueue
    /// time (`ClaimedDelivery.deviceActive`), read in the same transaction: the
    /// caller must not send one that is not.
    func claim(worker: String, limit: Int, leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery]

    /// Extends the lease of deliveries this worker still holds.
    func renew(worker: String, deliveryIDs: [Int64], leaseMillis: Int64, now: Int64) async throws(StoreError)

    /// Records final outcomes (each leaves the outbox, gets exactly one final log
    /// entry) and applies their token changes, in one transaction. An outcome for a
    /// delivery this worker no longer holds (its lease expired and another took it)
    /// is ignored and counted in the return value.
    func finish(worker: String, _ outcomes: [DeliveryOutcome], now: Int64) async throws(StoreError) -> Int

    /// Puts a claimed delivery back to pending with a new environment (the
    /// BadDeviceToken retry in the other environment); its apns-id stays.
    func retry(worker: String, deliveryID: Int64, environment: String, now: Int64) async throws(StoreError)

    /// Gives claimed deliveries back unsent (a worker stopping with deliveries in hand
    /// that it never sent): free for any worker at once, no attempt counted.
    func unclaim(worker: String, deliveryIDs: [Int64]) async throws(StoreError)

    /// Gives claimed deliveries back without a final answer (APNs gave none: the
    /// endpoint is unreachable, the client is shutting down): pending again from
    /// `availableAt`, their attempts counted, their apns-ids kept.
    func release(worker: String, deliveryIDs: [Int64], availableAt: Int64, now: Int64) async throws(StoreError)

    /// Deliveries pending in the outbox.
    func outboxDepth() async throws(StoreError) -> Int
    /// Those of them not due at `now` (quiet hours, a batching window, a retry's backoff).
    func outboxWaiting(now: Int64) async throws(StoreError) -> Int
    /// When the longest-due delivery became due (`available_at`, ms), nil when none is
    /// due at `now`: how long the outbox has kept something waiting that could be sent.
    func outboxOldestDue(now: Int64) async throws(StoreError) -> Int64?
}

/// A store that cannot do what was asked: the database is unreachable, or refused.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// The database could not take the call now and may later: SQLite's lock held by
    /// another connection past the busy timeout, a PostgreSQL server that cannot be
    /// reached. apns-server answers such a call 503 with Retry-After, not 500.
    public let isTemporary: Bool
    public init(_ description: String, temporary: Bool = false) {
        self.description = description
        self.isTemporary = temporary
    }
}

public enum Audience: Sendable, Hashable {
    case users([String])
    case company(String)
}

public struct Recipient: Sendable, Hashable {
    public var userID: String
    /// Saved values only.
    public var preferences: [String: PreferenceValue]
    /// Active iOS tokens of the app.
    public var devices: [Device]

    public struct Device: Sendable, Hashable {
        public var id: Int64
        public var token: String
        public var environment: String
        public init(id: Int64, token: String, environment: String) {
            self.id = id
            self.token = token
            self.environment = environment
        }
    }

    public init(userID: String, preferences: [String: PreferenceValue], devices: [Device]) {
        self.userID = userID
        self.preferences = preferences
        self.devices = devices
    }
}

public struct NewNotification: Sendable, Hashable {
    public var id: String
    public var type: String
    public var entityType: String?
    public var entityID: String?
    public var appType: String

    public init(id: String, type: String, entityType: String?, entityID: String?, appType: String) {
        self.id = id
        self.type = type
        self.entityType = entityType
        self.entityID = entityID
        self.appType = appType
    }
}

/// One message to one device, as the outbox keeps it until it is final.
public struct NewDelivery: Sendable, Hashable {
    public var userID: String
    public var deviceID: Int64
    public var token: String
    public var environment: String
    /// Chosen at enqueue time, kept across every attempt and restart.
    public var apnsID: String
    /// The exact bytes to send.
    public var payload: [UInt8]
    public var pushType: String
    public var priority: Int?
    public var collapseID: String?
    public var expiration: Int64?
    /// Held in the outbox until then (quiet hours deferred it, or a coalescing window
    /// closes then); nil: due at once.
    public var notBefore: Int64?
    /// Joins (or opens) a window of its device: see `Hold`.
    public var hold: Hold?

    public init(userID: String, deviceID: Int64, token: String, environment: String, apnsID: String,
                payload: [UInt8], pushType: String = "alert", priority: Int? = nil, collapseID: String? = nil,
                expiration: Int64? = nil, notBefore: Int64? = nil, hold: Hold? = nil) {
        self.userID = userID
        self.deviceID = deviceID
        self.token = token
        self.environment = environment
        self.apnsID = apnsID
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.collapseID = collapseID
        self.expiration = expiration
        self.notBefore = notBefore
        self.hold = hold
    }

    /// Neither held nor deferred: a worker may send it at once.
    public var isDueNow: Bool { notBefore == nil && hold == nil }
}

public struct ClaimedDelivery: Sendable, Hashable {
    public var id: Int64
    public var notificationID: String
    public var appType: String
    public var delivery: NewDelivery
    /// Attempts recorded so far (claims that ended in a finish or a retry).
    public var attempts: Int
    /// The other environment was tried already (BadDeviceToken rule): never twice.
    public var crossEnvironmentTried: Bool
    /// At claim time, the device is still an active iOS token of the delivery's app
    /// and user. False when it was deactivated (410, logout) or moved to another
    /// user since the enqueue: such a delivery is never sent.
    public var deviceActive: Bool
    /// A coalescing window's carrier: how many notifications it stands for (0: not a carrier).
    public var batched: Int

    public init(id: Int64, notificationID: String, appType: String, delivery: NewDelivery, attempts: Int,
                crossEnvironmentTried: Bool, deviceActive: Bool = true, batched: Int = 0) {
        self.id = id
        self.notificationID = notificationID
        self.appType = appType
        self.delivery = delivery
        self.attempts = attempts
        self.crossEnvironmentTried = crossEnvironmentTried
        self.deviceActive = deviceActive
        self.batched = batched
    }
}

/// A claim taken at enqueue time (see `OutboxStore.enqueue`): by whom, for how long.
public struct OutboxLease: Sendable, Hashable {
    public var worker: String
    public var millis: Int64

    public init(worker: String, millis: Int64) {
        self.worker = worker
        self.millis = millis
    }
}

extension DeliveryStore {
    /// Enqueues for any worker's claim.
    public func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery],
                        now: Int64) async throws(StoreError) {
        _ = try await enqueue(notification, deliveries, now: now, lease: nil)
    }
}

extension ClaimedDelivery {
    /// The deliveries an enqueue just wrote and leased, as a claim would return them:
    /// `rows` are each written row's (id, apns-id, device still active), read back in
    /// the enqueue's transaction. Rows come back in insertion order in practice; the
    /// apns-id (unique) pairs them with their delivery when they do not.
    static func enqueued(_ notification: NewNotification, _ deliveries: [NewDelivery],
                         rows: [(id: Int64, apnsID: String, active: Bool)]) -> [ClaimedDelivery] {
        var index: [String: Int]?
        return rows.enumerated().map { (i, row) in
            var at = i
            if index == nil, i >= deliveries.count || deliveries[i].apnsID != row.apnsID {
                index = Dictionary(deliveries.indices.map { (deliveries[$0].apnsID, $0) }, uniquingKeysWith: { a, _ in a })
            }
            if let index { at = index[row.apnsID]! }
            return ClaimedDelivery(id: row.id, notificationID: notification.id, appType: notification.appType,
                                   delivery: deliveries[at], attempts: 0, crossEnvironmentTried: false,
                                   deviceActive: row.active)
        }
    }
}

/// A delivery's final answer, and what it does to its token.
public struct DeliveryOutcome: Sendable, Hashable {
    public var deliveryID: Int64
    public var delivered: Bool
    public var status: Int
    public var reason: String?
    /// APNs' 410 timestamp (ms), or when the answer came.
    public var timestamp: Int64?
    public var attempts: Int
    public var tokenChange: TokenChange?

    public enum TokenChange: Sendable, Hashable {
        /// 410: deactivate, but only if the token was registered before `before`
        /// (a token re-registered since stays active).
        case deactivate(reason: String, registeredBefore: Int64)
        /// DeviceTokenNotForTopic, or BadDeviceToken in both environments.
        case deactivateNow(reason: String)
        /// It worked in the other environment: the token lives there.
        case moveEnvironment(String)
    }

    public init(deliveryID: Int64, delivered: Bool, status: Int, reason: String?, timestamp: Int64?,
                attempts: Int, tokenChange: TokenChange? = nil) {
        self.deliveryID = deliveryID
        self.delivered = delivered
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.attempts = attempts
        self.tokenChange = tokenChange
    }
}
