// Live Activity push tokens. Each is a `devices` row with platform 'liveactivity'
// (never listed with the device tokens, never in a fan-out: those read platform
// 'ios'), plus a `live_activity_tokens` row saying which kind it is. Sharing the
// devices table gives these tokens the outbox's claim check, the 410 rules and the
// cross-environment retry unchanged. An activity belongs to the user who first
// registered a token for it (`live_activities`, per app): another user cannot add a
// token to it, and a send to the activity reaches its owner's tokens only.

/// Live Activity tokens (their sends use the outbox).
public protocol LiveActivityStore: Sendable {
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
}

extension LiveActivityStore {
    /// One Live Activity registration without a cap on the user's tokens.
    @discardableResult
    func registerLiveActivity(_ registration: LiveActivityRegistration,
                              now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await registerLiveActivity(registration, maxActive: .max, now: now)
    }
}

/// Where a Live Activity push token reaches.
public enum LiveActivityKind: Sendable, Hashable {
    /// One running activity's update token (updates and the end).
    case update(activityID: String)
    /// The app's push-to-start token for one `ActivityAttributes` type.
    case start
}

public struct LiveActivityRegistration: Sendable, Hashable {
    public var userID: String
    /// Lower-case hex.
    public var token: String
    public var appType: String
    public var kind: LiveActivityKind
    public var attributesType: String
    /// "sandbox" or "production".
    public var environment: String

    public init(userID: String, token: String, appType: String, kind: LiveActivityKind, attributesType: String,
                environment: String = "production") {
        self.userID = userID
        self.token = token
        self.appType = appType
        self.kind = kind
        self.attributesType = attributesType
        self.environment = environment
    }
}

/// A Live Activity token as the app lists it, or as a send targets it.
public struct LiveActivityToken: Sendable, Hashable {
    /// The `devices` row: a delivery's `deviceID`.
    public var id: Int64
    public var userID: String
    public var token: String
    public var appType: String
    public var kind: LiveActivityKind
    public var attributesType: String
    public var environment: String
    public var lastUsedAt: Int64?
    public var createdAt: Int64

    public init(id: Int64, userID: String, token: String, appType: String, kind: LiveActivityKind,
                attributesType: String, environment: String, lastUsedAt: Int64?, createdAt: Int64) {
        self.id = id
        self.userID = userID
        self.token = token
        self.appType = appType
        self.kind = kind
        self.attributesType = attributesType
        self.environment = environment
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
    }
}

/// Which active tokens of an app a Live Activity send goes to.
public enum LiveActivityTarget: Sendable, Hashable {
    /// These users' push-to-start tokens for the attributes type.
    case startTokens(userIDs: [String], attributesType: String)
    /// These users' update tokens (of one attributes type, when given).
    case updateTokens(userIDs: [String], attributesType: String?)
    /// The update token(s) of one activity.
    case activity(String)
}
