// Receipts and opens: what a user's device reports of a delivery made to it (its
// Notification Service Extension ran: received; the user tapped it: opened). APNs'
// 200 says only that APNs took the notification; these say it arrived.

/// What a device reports of a delivery.
public enum NotificationEvent: String, Sendable, CaseIterable {
    case received, opened
}

/// A report recorded: the delivery's notification (for the metrics' labels) and the
/// delivery's times now; `new` lists the times this report set (a repeat sets none).
public struct NotificationEventResult: Sendable, Hashable {
    public var appType: String
    public var type: String
    public var receivedAt: Int64?
    public var openedAt: Int64?
    public var new: [NotificationEvent]

    public init(appType: String, type: String, receivedAt: Int64?, openedAt: Int64?, new: [NotificationEvent]) {
        self.appType = appType
        self.type = type
        self.receivedAt = receivedAt
        self.openedAt = openedAt
        self.new = new
    }
}

/// What a report came to: recorded, or refused because the delivery never reached
/// the device (APNs did not take it, or not yet), so nothing can have arrived.
public enum NotificationEventRecord: Sendable, Hashable {
    case recorded(NotificationEventResult)
    /// The delivery's state ("pending" or "failed"); nothing was written.
    case notDelivered(state: String)
}

/// A notification's reports: how many of its deliveries were received and opened,
/// and the times of those asked for (by apns-id).
public struct NotificationEngagement: Sendable, Hashable {
    public var received = 0
    public var opened = 0
    public var times: [String: (receivedAt: Int64?, openedAt: Int64?)] = [:]

    public init() {}

    public static func == (a: Self, b: Self) -> Bool {
        a.received == b.received && a.opened == b.opened && a.times.count == b.times.count
            && a.times.allSatisfy { b.times[$0.key]?.receivedAt == $0.value.receivedAt
                && b.times[$0.key]?.openedAt == $0.value.openedAt }
    }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(received)
        hasher.combine(opened)
    }
}

public protocol NotificationEventStore: Sendable {
    /// Records that the delivery `apnsID`, made to one of `userID`'s tokens, was
    /// received (or opened, which implies received) at `at`, or at the delivery's
    /// send when `at` is earlier (nothing arrives before it is sent). The first time
    /// of each is kept: a repeat changes nothing. Refused for a delivery that is not
    /// delivered. Nil when no delivery to this user has that apns-id (nothing is written).
    func recordNotificationEvent(apnsID: String, userID: String, _ event: NotificationEvent, at: Int64,
                                 now: Int64) async throws(StoreError) -> NotificationEventRecord?

    /// The notification's counts of received and opened deliveries, and the times of
    /// the deliveries `apnsIDs` (a page of its log).
    func notificationEngagement(notificationID: String, apnsIDs: [String]) async throws(StoreError) -> NotificationEngagement

    /// Retention: deletes up to `limit` reports of deliveries received before `cutoff`.
    func pruneNotificationEvents(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}
