/// What the support views need to say why something has not gone yet: where a
/// pending delivery stands in the outbox, what a notification says, and the
/// scheduled notifications still to go.
public protocol WaitViewStore: Sendable {
    /// The outbox rows of these deliveries (by apns-id), with each one's app: those
    /// that are no longer in the outbox (final, or a batching window's member) come
    /// back with `availableAt` nil, and unknown apns-ids not at all.
    func outboxPlaces(apnsIDs: [String]) async throws(StoreError) -> [String: OutboxPlace]

    /// The payload of the notification's first delivery, as stored (every delivery of
    /// a notification carries the same alert; only badges and quiet hours' sound
    /// differ); nil when it has none.
    func notificationPayload(id: String) async throws(StoreError) -> [UInt8]?

    /// Schedules still to go (`scheduled`, or `sending` now), soonest first, of one
    /// app or all; `after`: the previous page's `next` (its last send time and id).
    func upcomingSchedules(appType: String?, limit: Int,
                           after: TimeCursor?) async throws(StoreError) -> Page<ScheduleRow, TimeCursor>
}

/// A delivery's place in the outbox.
public struct OutboxPlace: Sendable, Hashable {
    public var apnsID: String
    /// Its notification's app (whose preferences and quiet hours apply).
    public var appType: String
    /// When a worker may take it (ms); nil when it is not in the outbox.
    public var availableAt: Int64?
    /// Until when a worker holds it (ms); nil when none does.
    public var leaseUntil: Int64?

    public init(apnsID: String, appType: String, availableAt: Int64?, leaseUntil: Int64?) {
        self.apnsID = apnsID
        self.appType = appType
        self.availableAt = availableAt
        self.leaseUntil = leaseUntil
    }
}
