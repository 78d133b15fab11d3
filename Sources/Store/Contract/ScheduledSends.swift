/// A send the backend asked for at a later time (`send_at`): the request itself,
/// checked and stored at once, fanned out by a worker when it is due, so that
/// preferences, quiet hours and batching are decided at send time, against the
/// devices registered then. Its id becomes the notification's id.
public struct NewSchedule: Sendable, Hashable {
    public var id: String
    /// `notification` or `live_activity`: which route's request `request` is.
    public var kind: String
    public var appType: String
    public var type: String
    /// The backend's name for it: a newer schedule with the same app, kind and key
    /// replaces the pending one (a notification's key never names a Live Activity's).
    public var scheduleKey: String?
    /// The request's JSON body as checked, without its `send_at` and `schedule_key`.
    public var request: [UInt8]
    public var sendAt: Int64

    public init(id: String, kind: String, appType: String, type: String, scheduleKey: String?,
                request: [UInt8], sendAt: Int64) {
        self.id = id
        self.kind = kind
        self.appType = appType
        self.type = type
        self.scheduleKey = scheduleKey
        self.request = request
        self.sendAt = sendAt
    }
}

/// A schedule as stored. `state`: `scheduled` (waiting), `sending` (a worker holds
/// it), `sent` (its notification exists), `cancelled`, `superseded` (by
/// `supersededBy`) or `failed` (its request no longer checks: `error`).
public struct ScheduleRow: Sendable, Hashable {
    public var schedule: NewSchedule
    public var createdAt: Int64
    public var state: String
    public var supersededBy: String?
    public var finishedAt: Int64?
    public var error: String?
}

/// Scheduled sends: stored whole, claimed by one worker when due (across instances),
/// then finished, cancelled or superseded; final ones are pruned with the log.
public protocol ScheduledSends {
    /// Stores a schedule. With a key, in the same transaction, the app's pending
    /// schedule of the same kind with that key becomes `superseded` by this one: its
    /// id is returned.
    func schedule(_ schedule: NewSchedule, now: Int64) async throws(StoreError) -> String?
    /// Takes up to `limit` due schedules (`sendAt` passed) for `worker`, oldest
    /// first, and those whose worker's lease ran out: each is `sending` until
    /// `now + leaseMillis`. One worker holds one at a time, whatever the instance.
    func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                           now: Int64) async throws(StoreError) -> [ScheduleRow]
    /// Its final state (`sent` or `failed`); false when this worker no longer holds it.
    func finishSchedule(id: String, worker: String, state: String, error: String?,
                        now: Int64) async throws(StoreError) -> Bool
    /// Cancels it if it is still waiting (`scheduled`); the row as it is after, nil
    /// when there is none.
    func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow?
    func scheduled(id: String) async throws(StoreError) -> ScheduleRow?
    /// Those waiting or held (not final).
    func pendingSchedules() async throws(StoreError) -> Int
    /// Retention: up to `limit` final schedules finished before `cutoff`; how many went.
    func pruneSchedules(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}
