/// Retention: what the log and the registry forget, a short transaction at a time.
public protocol RetentionStore: Sendable {
    /// Retention: removes up to `limit` notifications created before `cutoff` whose
    /// deliveries are all final (with those deliveries), and up to `limit` broadcasts
    /// finished before it. One short transaction per call: the caller repeats until
    /// nothing is left, so no long transaction holds the writer (or VACUUM) back.
    func pruneLog(before cutoff: Int64, limit: Int) async throws(StoreError) -> PruneResult
    /// Retention of the registry: deletes up to `limit` tokens deactivated before
    /// `cutoff` (with what hangs on them: their Live Activity kind, their last use,
    /// an activity's owner once none of its tokens is left); how many went.
    func pruneDevices(inactiveBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}

/// What one pruning step removed from the log.
public struct PruneResult: Sendable, Equatable {
    public var notifications = 0
    public var deliveries = 0
    public var broadcasts = 0

    public init(notifications: Int = 0, deliveries: Int = 0, broadcasts: Int = 0) {
        self.notifications = notifications
        self.deliveries = deliveries
        self.broadcasts = broadcasts
    }

    public var isEmpty: Bool { notifications == 0 && broadcasts == 0 }
}
