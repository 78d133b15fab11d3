/// The delivery log: what happened to a notification, or to one apns-id.
public protocol DeliveryLogStore: Sendable {
    /// A notification with its counts by state, and one page of its deliveries in
    /// log order: at most `limit`, those after the cursor `after` (from the previous
    /// page's `next`). A 100k fan-out is read a page at a time, never whole.
    func notification(id: String, limit: Int, after: Int64?) async throws(StoreError) -> NotificationView?
    func delivery(apnsID: String) async throws(StoreError) -> DeliveryView?
}

extension DeliveryLogStore {
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
    public var appType: String
    /// This page of deliveries.
    public var deliveries: [DeliveryView]
    /// All of the notification's deliveries by state, not only this page's.
    public var counts: [String: Int]
    /// The cursor of the next page; nil on the last.
    public var next: Int64?

    public init(id: String, type: String, entityID: String?, createdAt: Int64, deliveries: [DeliveryView],
                counts: [String: Int] = [:], next: Int64? = nil, appType: String = "") {
        self.id = id
        self.appType = appType
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
    /// replaced it): `carriedBy` names that delivery; "cancelled" (the backend took
    /// it back before it went).
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
    /// Its notification's app.
    public var appType: String

    public init(notificationID: String, userID: String, token: String, environment: String, state: String,
                apnsID: String, status: Int?, reason: String?, timestamp: Int64?, attempts: Int, finishedAt: Int64?,
                notBefore: Int64? = nil, carriedBy: String? = nil, batched: Int? = nil, appType: String = "") {
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
        self.appType = appType
    }
}
