// Broadcast channels (iOS 18): one per (app, environment, entity), as APNs issued
// it, and each broadcast sent on one, pending until its one final entry.

/// Broadcast channels and the broadcasts sent on them.
public protocol ChannelStore: Sendable {
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

/// What names a channel in the service: the app, the APNs environment it lives in,
/// and the entity (a match, a delivery, an order) whose Live Activities it updates.
public struct ChannelKey: Sendable, Hashable {
    public var appType: String
    /// "sandbox" or "production".
    public var environment: String
    public var entityType: String
    public var entityID: String

    public init(appType: String, environment: String, entityType: String, entityID: String) {
        self.appType = appType
        self.environment = environment
        self.entityType = entityType
        self.entityID = entityID
    }
}

public struct ChannelRow: Sendable, Hashable {
    public var key: ChannelKey
    /// APNs' `apns-channel-id`.
    public var channelID: String
    /// APNs' `message-storage-policy`: 0 none stored, 1 the most recent.
    public var storagePolicy: Int
    public var createdAt: Int64

    public init(key: ChannelKey, channelID: String, storagePolicy: Int, createdAt: Int64) {
        self.key = key
        self.channelID = channelID
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
    }
}

/// Which app users may read a channel's id (to subscribe their Live Activity to
/// it), as the backend said: everyone, or the users and the company it names.
/// The backend itself always may.
public struct ChannelAudience: Sendable, Hashable {
    public var isPublic: Bool
    public var userIDs: [String]
    /// Every user whose JWT carries this `company_id`.
    public var companyID: String?

    public init(isPublic: Bool = false, userIDs: [String] = [], companyID: String? = nil) {
        self.isPublic = isPublic
        self.userIDs = userIDs
        self.companyID = companyID
    }

    /// No app user: a channel created without an audience has this one.
    public static let nobody = ChannelAudience()
}

/// A broadcast as recorded before it is sent.
public struct NewBroadcast: Sendable, Hashable {
    public var id: String
    public var channel: ChannelRow
    /// The exact bytes to send.
    public var payload: [UInt8]
    public var priority: Int?
    /// UNIX seconds; 0: no storage (the only value a no-storage channel takes).
    public var expiration: Int64

    public init(id: String, channel: ChannelRow, payload: [UInt8], priority: Int?, expiration: Int64) {
        self.id = id
        self.channel = channel
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
    }
}

public struct ClaimedBroadcast: Sendable, Hashable {
    public var broadcast: NewBroadcast
    /// Attempts recorded so far (claims that ended in a release).
    public var attempts: Int

    public init(broadcast: NewBroadcast, attempts: Int) {
        self.broadcast = broadcast
        self.attempts = attempts
    }
}

/// A broadcast's final answer.
public struct BroadcastOutcome: Sendable, Hashable {
    public var id: String
    public var delivered: Bool
    public var status: Int
    public var reason: String?
    /// `apns-request-id` and `apns-unique-id` of the answer.
    public var requestID: String?
    public var uniqueID: String?
    public var attempts: Int

    public init(id: String, delivered: Bool, status: Int, reason: String?, requestID: String?, uniqueID: String?,
                attempts: Int) {
        self.id = id
        self.delivered = delivered
        self.status = status
        self.reason = reason
        self.requestID = requestID
        self.uniqueID = uniqueID
        self.attempts = attempts
    }
}

public struct BroadcastView: Sendable, Hashable {
    public var id: String
    public var key: ChannelKey
    public var channelID: String
    /// "pending", "delivered" or "failed".
    public var state: String
    public var status: Int?
    public var reason: String?
    public var requestID: String?
    public var uniqueID: String?
    public var attempts: Int
    public var createdAt: Int64
    public var finishedAt: Int64?

    public init(id: String, key: ChannelKey, channelID: String, state: String, status: Int?, reason: String?,
                requestID: String?, uniqueID: String?, attempts: Int, createdAt: Int64, finishedAt: Int64?) {
        self.id = id
        self.key = key
        self.channelID = channelID
        self.state = state
        self.status = status
        self.reason = reason
        self.requestID = requestID
        self.uniqueID = uniqueID
        self.attempts = attempts
        self.createdAt = createdAt
        self.finishedAt = finishedAt
    }
}
