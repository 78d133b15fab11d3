/// What a support engineer looks up (the console, or a backend's own tools): a
/// user's devices whatever their state, a user's recent deliveries, the recent
/// notifications with their counts, and the tokens deactivated lately. Every list
/// is newest first and paged: at most `limit`, those older than the cursor the
/// previous page returned as `next`.
public protocol SupportViewStore: Sendable {
    /// Every device token of the user, active or not, newest registration first
    /// (Live Activity tokens are not device tokens).
    func userDevices(userID: String) async throws(StoreError) -> [UserDevice]

    /// The user's deliveries, newest first; `before`: the previous page's `next`.
    func userDeliveries(userID: String, limit: Int, before: Int64?) async throws(StoreError) -> Page<DeliveryView, Int64>

    /// Notifications, newest first, each with its deliveries counted by state.
    func recentNotifications(limit: Int, before: TimeCursor?) async throws(StoreError) -> Page<NotificationSummary, TimeCursor>

    /// Device tokens deactivated at `since` or later, most recently deactivated first.
    func deactivatedDevices(since: Int64, limit: Int,
                            before: TimeCursor?) async throws(StoreError) -> Page<UserDevice, TimeCursor>
}

/// One page of a list, and the cursor of the next (nil on the last).
public struct Page<Item: Sendable & Hashable, Cursor: Sendable & Hashable>: Sendable, Hashable {
    public var items: [Item]
    public var next: Cursor?

    public init(items: [Item], next: Cursor?) {
        self.items = items
        self.next = next
    }

    /// The page in `rows`, read in the list's order up to `limit + 1`: a row past
    /// `limit` only tells that another page follows, whose cursor is that of the
    /// page's last item (`cursor` of its index in `rows`).
    init(rows: [Item], limit: Int, cursor: (Int) -> Cursor) {
        guard rows.count > limit else {
            self.init(items: rows, next: nil)
            return
        }
        self.init(items: Array(rows.prefix(limit)), next: cursor(limit - 1))
    }
}

/// A place in a list ordered by a time and then by an id, both descending: the
/// last item of a page. Its text form is `<millis>.<id>` (the id may hold dots;
/// the time never does).
public struct TimeCursor: Sendable, Hashable {
    public var millis: Int64
    public var id: String

    public init(millis: Int64, id: String) {
        self.millis = millis
        self.id = id
    }

    public var text: String { "\(millis).\(id)" }

    public init?(text: String) {
        // Digits only, as `text` writes them; the id is an identifier, never a control character.
        guard let dot = text.firstIndex(of: "."), text[..<dot].allSatisfy({ $0.isASCII && $0.isNumber }),
              let millis = Int64(text[..<dot]) else { return nil }
        let id = String(text[text.index(after: dot)...])
        guard !id.isEmpty, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) else { return nil }
        self.init(millis: millis, id: id)
    }
}

/// A device token as support sees it: what it is, and whether it is still sent to.
public struct UserDevice: Sendable, Hashable {
    public var id: Int64
    public var userID: String
    public var appType: String
    public var token: String
    public var platform: String
    public var environment: String
    public var deviceName: String?
    public var osVersion: String?
    public var appVersion: String?
    public var isActive: Bool
    /// Why it is no longer sent to: "unregistered" (logout), "replaced" (the user's
    /// newest tokens took its place), or APNs' reason ("Unregistered", "BadDeviceToken", …).
    public var deactivatedReason: String?
    public var deactivatedAt: Int64?
    public var lastUsedAt: Int64?
    public var createdAt: Int64
    /// The last (re-)registration.
    public var registeredAt: Int64

    public init(id: Int64, userID: String, appType: String, token: String, platform: String, environment: String,
                deviceName: String?, osVersion: String?, appVersion: String?, isActive: Bool,
                deactivatedReason: String?, deactivatedAt: Int64?, lastUsedAt: Int64?, createdAt: Int64,
                registeredAt: Int64) {
        self.id = id
        self.userID = userID
        self.appType = appType
        self.token = token
        self.platform = platform
        self.environment = environment
        self.deviceName = deviceName
        self.osVersion = osVersion
        self.appVersion = appVersion
        self.isActive = isActive
        self.deactivatedReason = deactivatedReason
        self.deactivatedAt = deactivatedAt
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
        self.registeredAt = registeredAt
    }
}

/// A notification's header and its deliveries counted by state (as `NotificationView.counts`).
public struct NotificationSummary: Sendable, Hashable {
    public var id: String
    public var type: String
    public var appType: String
    public var entityID: String?
    public var createdAt: Int64
    public var counts: [String: Int]

    public init(id: String, type: String, appType: String, entityID: String?, createdAt: Int64, counts: [String: Int]) {
        self.id = id
        self.type = type
        self.appType = appType
        self.entityID = entityID
        self.createdAt = createdAt
        self.counts = counts
    }
}
