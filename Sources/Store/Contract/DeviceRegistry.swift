/// The device registry: which tokens a user has, of which app and environment.
public protocol DeviceRegistry: Sendable {
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

extension DeviceRegistry {
    /// One device registration without a cap on the user's tokens (tests seed with it).
    @discardableResult
    func register(_ device: DeviceRegistration, now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await register([device], maxActive: .max, now: now)
    }
}
