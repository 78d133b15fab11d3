/// The service's memory: device registry, preferences, the outbox and the delivery
/// log, behind one interface so that SQLite (one instance) and PostgreSQL (several
/// instances) serve the same service. It knows nothing of HTTP or APNs: the service
/// decides policy (who gets what, what a 410 means) and asks the store to record it.
///
/// Every method is one transaction. Times are milliseconds since 1970 (UTC), passed
/// in by the caller so that tests control the clock.
public protocol DeliveryStore: WebhookEventStore, NotificationEventStore {
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

    // MARK: Device registry

    /// Upserts each by (app type, token), all in one transaction: a re-registered
    /// token is updated (and moved to this user, reactivated, `registeredAt` = `now`),
    /// never duplicated. A token that moves to another user keeps nothing of the old
    /// owner's (its name, versions, creation and last use are the new registration's).
    /// Each user keeps at most `maxActive` active device tokens of an app: the oldest
    /// registrations beyond that are deactivated ("replaced").
    ///
    /// Either every registration is stored or none: a refusal (a token that is a
    /// Live Activity token) is returned with nothing stored, an error rolls back too.
    func register(_ devices: [DeviceRegistration], maxActive: Int,
                  now: Int64) async throws(StoreError) -> RegistrationRefusal?

    /// Soft-deletes one of this user's active tokens; false when it is not one of them.
    func unregister(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool

    /// This user's active tokens, newest first.
    func devices(userID: String) async throws(StoreError) -> [DeviceRow]

    // MARK: Preferences

    /// The values this user saved for this app (keys never saved are absent).
    func preferences(userID: String, appType: String) async throws(StoreError) -> [String: PreferenceValue]

    /// Sets some keys, creating the record if there is none.
    func updatePreferences(userID: String, appType: String, _ changes: [String: PreferenceValue],
                           now: Int64) async throws(StoreError)

    // MARK: Fan-out and the outbox

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

    /// A fan-out: `audience`'s recipients (as `recipients` reads them), the deliveries
    /// `plan` makes of them (with whatever else the caller counts, returned as is),
    /// enqueued as `enqueue(_:_:now:lease:)` does, and what it leased handed to
    /// `leased` (every leased delivery once; nothing without a lease or with holds).
    /// A store may read the recipients in the enqueue's own transaction, and may
    /// commit a large fan-out in parts, calling `leased` as each commits; the
    /// default reads them first and commits once. When it returns, every delivery
    /// is committed. When it throws after a part was committed, the error says how
    /// many were: those are sent and logged as any others.
    func fanOut<Plan: Sendable>(
        _ notification: NewNotification, appType: String, audience: Audience, now: Int64, lease: OutboxLease?,
        plan: @escaping @Sendable ([Recipient]) -> (deliveries: [NewDelivery], plan: Plan),
        leased: @Sendable ([ClaimedDelivery]) async -> Void
    ) async throws(StoreError) -> Plan

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

    // MARK: Reading the log

    /// A notification with its counts by state, and one page of its deliveries in
    /// log order: at most `limit`, those after the cursor `after` (from the previous
    /// page's `next`). A 100k fan-out is read a page at a time, never whole.
    func notification(id: String, limit: Int, after: Int64?) async throws(StoreError) -> NotificationView?
    func delivery(apnsID: String) async throws(StoreError) -> DeliveryView?
    /// Deliveries pending in the outbox.
    func outboxDepth() async throws(StoreError) -> Int
    /// Those of them not due at `now` (quiet hours, a batching window, a retry's backoff).
    func outboxWaiting(now: Int64) async throws(StoreError) -> Int
    /// Retention: removes up to `limit` notifications created before `cutoff` whose
    /// deliveries are all final (with those deliveries), and up to `limit` broadcasts
    /// finished before it. One short transaction per call: the caller repeats until
    /// nothing is left, so no long transaction holds the writer (or VACUUM) back.
    func pruneLog(before cutoff: Int64, limit: Int) async throws(StoreError) -> PruneResult
    /// Retention of the registry: deletes up to `limit` tokens deactivated before
    /// `cutoff` (with what hangs on them: their Live Activity kind, their last use,
    /// an activity's owner once none of its tokens is left); how many went.
    func pruneDevices(inactiveBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int

    // MARK: Live Activities (tokens; their sends use the outbox above)

    /// Upserts by (app type, token), like `register`: moved to this user, reactivated,
    /// at most `maxActive` active Live Activity tokens per user and app. An activity
    /// belongs to the user who first registered a token for it (per app): another
    /// user's token for it is refused, as is a token that is a device token. A
    /// refusal stores nothing.
    func registerLiveActivity(_ registration: LiveActivityRegistration, maxActive: Int,
                              now: Int64) async throws(StoreError) -> RegistrationRefusal?
    /// Soft-deletes one of this user's active Live Activity tokens; false when it is not one of them.
    func unregisterLiveActivity(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool
    /// This user's active Live Activity tokens, newest first.
    func liveActivityTokens(userID: String) async throws(StoreError) -> [LiveActivityToken]
    /// The active Live Activity tokens of an app a send targets, by user id (an
    /// activity's: its owner's only).
    func liveActivityTokens(appType: String, _ target: LiveActivityTarget) async throws(StoreError) -> [LiveActivityToken]

    // MARK: Broadcast channels and their sends

    func channel(_ key: ChannelKey) async throws(StoreError) -> ChannelRow?
    /// The key's channel if its audience includes this app user (public, the user
    /// named, or the user's company named); nil when there is none or it is not theirs.
    func channel(_ key: ChannelKey, visibleTo userID: String, companyID: String?) async throws(StoreError) -> ChannelRow?
    /// An app's channels (of one environment and entity type, when given), by entity.
    func channels(appType: String, environment: String?, entityType: String?) async throws(StoreError) -> [ChannelRow]
    /// Stores a channel APNs created, unless its key has one already: returns the
    /// one stored (when it is not `channel`, the caller deletes its own on APNs).
    /// With `audience`, the stored channel's audience becomes it; without, a new
    /// channel has none (no app user may read it) and an existing one keeps its own.
    func addChannel(_ channel: ChannelRow, audience: ChannelAudience?) async throws(StoreError) -> ChannelRow
    /// Replaces the audience of the key's channel; false when the key has none.
    func setChannelAudience(_ key: ChannelKey, _ audience: ChannelAudience) async throws(StoreError) -> Bool
    /// Forgets the key's channel if it is still `channelID`.
    func removeChannel(_ key: ChannelKey, channelID: String) async throws(StoreError) -> Bool
    /// Records a broadcast, pending, before it is sent.
    func enqueueBroadcast(_ broadcast: NewBroadcast, now: Int64) async throws(StoreError)
    /// Claims due pending broadcasts whose lease is free or expired (as `claim`).
    func claimBroadcasts(worker: String, limit: Int, leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedBroadcast]
    /// Writes the one final entry; false (nothing written) when this worker no longer holds it.
    func finishBroadcast(worker: String, _ outcome: BroadcastOutcome, now: Int64) async throws(StoreError) -> Bool
    /// Extends the lease of broadcasts this worker still holds (a send may outlast one).
    func renewBroadcasts(worker: String, ids: [String], leaseMillis: Int64, now: Int64) async throws(StoreError)
    /// Pending again from `availableAt`, the attempt counted.
    func releaseBroadcast(worker: String, id: String, availableAt: Int64, now: Int64) async throws(StoreError)
    func broadcast(id: String) async throws(StoreError) -> BroadcastView?
    /// Broadcasts not yet final.
    func pendingBroadcasts() async throws(StoreError) -> Int
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

public struct DeviceRegistration: Sendable, Hashable {
    public var userID: String
    public var companyID: String?
    /// Lower-case hex.
    public var token: String
    /// "ios" or "android" (stored, never sent).
    public var platform: String
    public var appType: String
    public var deviceName: String?
    public var osVersion: String?
    public var appVersion: String?
    /// "sandbox" or "production".
    public var environment: String

    public init(userID: String, companyID: String? = nil, token: String, platform: String, appType: String,
                deviceName: String? = nil, osVersion: String? = nil, appVersion: String? = nil,
                environment: String = "production") {
        self.userID = userID
        self.companyID = companyID
        self.token = token
        self.platform = platform
        self.appType = appType
        self.deviceName = deviceName
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.environment = environment
    }
}

/// Why a registration was refused; nothing of the request was stored.
public struct RegistrationRefusal: Error, Sendable, Hashable {
    public enum Reason: Sendable, Hashable {
        /// The token is registered as the other kind: a device token registered as a
        /// Live Activity token, or the reverse. One never becomes the other.
        case otherKind
        /// The activity belongs to another user of the app.
        case activityOfAnotherUser
    }

    public var reason: Reason
    /// Which registration of the list.
    public var index: Int

    public init(_ reason: Reason, index: Int = 0) {
        self.reason = reason
        self.index = index
    }
}

/// Device tokens and Live Activity tokens each count against a user's cap apart:
/// registering activities never pushes out the user's phones.
enum TokenKind {
    case device, liveActivity

    /// The `devices` rows of this kind (SQL, the same on both stores).
    var rows: String {
        switch self {
        case .device: "platform <> 'liveactivity'"
        case .liveActivity: "platform = 'liveactivity'"
        }
    }
}

/// A token as `GET /api/user/device-tokens` lists it.
public struct DeviceRow: Sendable, Hashable {
    public var id: Int64
    public var platform: String
    public var appType: String
    public var deviceName: String?
    public var osVersion: String?
    public var appVersion: String?
    public var lastUsedAt: Int64?
    public var createdAt: Int64

    public init(id: Int64, platform: String, appType: String, deviceName: String?, osVersion: String?,
                appVersion: String?, lastUsedAt: Int64?, createdAt: Int64) {
        self.id = id
        self.platform = platform
        self.appType = appType
        self.deviceName = deviceName
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
    }
}

public enum Audience: Sendable, Hashable {
    case users([String])
    case company(String)
}

/// A saved preference: a toggle, or a text setting (a quiet-hours time, a time zone).
/// Literals of either kind read as one, so `["newEnquiry": false]` is a change.
public enum PreferenceValue: Sendable, Hashable, ExpressibleByBooleanLiteral, ExpressibleByStringLiteral {
    case bool(Bool)
    case text(String)

    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(stringLiteral value: String) { self = .text(value) }

    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var text: String? { if case .text(let t) = self { t } else { nil } }
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

/// A claim taken at enqueue time (see `DeliveryStore.enqueue`): by whom, for how long.
public struct OutboxLease: Sendable, Hashable {
    public var worker: String
    public var millis: Int64

    public init(worker: String, millis: Int64) {
        self.worker = worker
        self.millis = millis
    }
}

extension DeliveryStore {
    public func fanOut<Plan: Sendable>(
        _ notification: NewNotification, appType: String, audience: Audience, now: Int64, lease: OutboxLease?,
        plan: @escaping @Sendable ([Recipient]) -> (deliveries: [NewDelivery], plan: Plan),
        leased: @Sendable ([ClaimedDelivery]) async -> Void
    ) async throws(StoreError) -> Plan {
        let planned = plan(try await recipients(appType: appType, audience: audience))
        await leased(try await enqueue(notification, planned.deliveries, now: now, lease: lease))
        return planned.plan
    }

    /// Enqueues for any worker's claim.
    public func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery],
                        now: Int64) async throws(StoreError) {
        _ = try await enqueue(notification, deliveries, now: now, lease: nil)
    }
}

extension ClaimedDelivery {
    /// The deliveries a fan-out just wrote and leased, from the recipients it read in
    /// the same transaction (every device as read, so active): `written` are the
    /// rows' (id, device id), as the insert returned them. Nil unless they came back
    /// in insertion order, as SQLite returns them in practice (without promising it):
    /// then each is its delivery's device, and the ids increase (SQLite gives a new
    /// row the largest id plus one).
    static func enqueued(_ notification: NewNotification, _ deliveries: [NewDelivery],
                         written: [(id: Int64, deviceID: Int64)]) -> [ClaimedDelivery]? {
        guard written.count == deliveries.count,
              zip(written, deliveries).allSatisfy({ $0.deviceID == $1.deviceID }),
              zip(written, written.dropFirst()).allSatisfy({ $0.id < $1.id }) else { return nil }
        return zip(written, deliveries).map { row, delivery in
            ClaimedDelivery(id: row.id, notificationID: notification.id, appType: notification.appType,
                            delivery: delivery, attempts: 0, crossEnvironmentTried: false, deviceActive: true)
        }
    }

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

extension DeliveryStore {
    /// One device registration without a cap on the user's tokens (tests seed with it).
    @discardableResult
    func register(_ device: DeviceRegistration, now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await register([device], maxActive: .max, now: now)
    }

    /// One Live Activity registration without a cap on the user's tokens.
    @discardableResult
    func registerLiveActivity(_ registration: LiveActivityRegistration,
                              now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await registerLiveActivity(registration, maxActive: .max, now: now)
    }

    /// Every delivery at once: for tests and small notifications.
    public func notification(id: String) async throws(StoreError) -> NotificationView? {
        try await notification(id: id, limit: Int.max, after: nil)
    }
}

public struct NotificationView: Sendable, Hashable {
    public var id: String
    public var type: String
    public var entityID: String?
    public var createdAt: Int64
    /// This page of deliveries.
    public var deliveries: [DeliveryView]
    /// All of the notification's deliveries by state, not only this page's.
    public var counts: [String: Int]
    /// The cursor of the next page; nil on the last.
    public var next: Int64?

    public init(id: String, type: String, entityID: String?, createdAt: Int64, deliveries: [DeliveryView],
                counts: [String: Int] = [:], next: Int64? = nil) {
        self.id = id
        self.type = type
        self.entityID = entityID
        self.createdAt = createdAt
        self.deliveries = deliveries
        self.counts = counts
        self.next = next
    }
}

public struct DeliveryView: Sendable, Hashable {
    public var notificationID: String
    public var userID: String
    public var token: String
    public var environment: String
    /// "pending", "delivered" or "failed"; "batched" (a coalescing window's send
    /// carried it) or "superseded" (a later deferred delivery with its collapse key
    /// replaced it): `carriedBy` names that delivery.
    public var state: String
    public var apnsID: String
    public var status: Int?
    public var reason: String?
    public var timestamp: Int64?
    public var attempts: Int
    public var finishedAt: Int64?
    /// Held until then (quiet hours, a coalescing window).
    public var notBefore: Int64?
    /// The apns-id of the delivery that carried (or superseded) this one.
    public var carriedBy: String?
    /// A carrier: how many notifications it stands for.
    public var batched: Int?

    public init(notificationID: String, userID: String, token: String, environment: String, state: String,
                apnsID: String, status: Int?, reason: String?, timestamp: Int64?, attempts: Int, finishedAt: Int64?,
                notBefore: Int64? = nil, carriedBy: String? = nil, batched: Int? = nil) {
        self.notificationID = notificationID
        self.userID = userID
        self.token = token
        self.environment = environment
        self.state = state
        self.apnsID = apnsID
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.attempts = attempts
        self.finishedAt = finishedAt
        self.notBefore = notBefore
        self.carriedBy = carriedBy
        self.batched = batched
    }
}
