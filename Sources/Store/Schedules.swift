import Foundation
import GRDB

/// A send the backend asked for at a later time (`send_at`): the request itself,
/// checked and stored at once, fanned out by a worker when it is due, so that
/// preferences, quiet hours and batching are decided at send time, against the
/// devices registered then. Its id becomes the notification's id.
public struct NewSchedule: Sendable, Equatable {
    public var id: String
    /// `notification` or `live_activity`: which route's request `request` is.
    public var kind: String
    public var appType: String
    public var type: String
    /// The backend's name for it: a newer schedule with the same app and key
    /// replaces the pending one.
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
public struct ScheduleRow: Sendable, Equatable {
    public var schedule: NewSchedule
    public var createdAt: Int64
    public var state: String
    public var supersededBy: String?
    public var finishedAt: Int64?
    public var error: String?
}

public protocol ScheduledSends {
    /// Stores a schedule. With a key, in the same transaction, the app's pending
    /// schedule with that key becomes `superseded` by this one: its id is returned.
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

extension SQLiteStore: ScheduledSends {
    static let scheduleColumns = """
        id, kind, app_type, type, schedule_key, request, send_at, created_at, state, superseded_by, finished_at, error
        """

    static func scheduleRow(_ row: Row) -> ScheduleRow {
        ScheduleRow(schedule: NewSchedule(id: row[0], kind: row[1], appType: row[2], type: row[3], scheduleKey: row[4],
                                          request: Array(row[5] as Data), sendAt: row[6]),
                    createdAt: row[7], state: row[8], supersededBy: row[9], finishedAt: row[10], error: row[11])
    }

    public func schedule(_ s: NewSchedule, now: Int64) async throws(StoreError) -> String? {
        try await write("schedule a notification") { db in
            var superseded: String?
            if let key = s.scheduleKey {
                superseded = try String.fetchOne(db, sql: """
                    UPDATE scheduled_notifications SET state = 'superseded', superseded_by = ?, finished_at = ?
                    WHERE app_type = ? AND schedule_key = ? AND state = 'scheduled' RETURNING id
                    """, arguments: [s.id, now, s.appType, key])
            }
            try db.execute(sql: """
                INSERT INTO scheduled_notifications (id, kind, app_type, type, schedule_key, request, send_at, created_at, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'scheduled')
                """, arguments: [s.id, s.kind, s.appType, s.type, s.scheduleKey, Data(s.request), s.sendAt, now])
            return superseded
        }
    }

    public func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                                  now: Int64) async throws(StoreError) -> [ScheduleRow] {
        try await write("claim due schedules") { db in
            let rows = try Row.fetchAll(db, sql: """
                UPDATE scheduled_notifications SET state = 'sending', lease_owner = ?, lease_until = ?
                WHERE id IN (SELECT id FROM scheduled_notifications
                             WHERE (state = 'scheduled' AND send_at <= ?) OR (state = 'sending' AND lease_until <= ?)
                             ORDER BY send_at LIMIT ?)
                RETURNING \(Self.scheduleColumns)
                """, arguments: [worker, now + leaseMillis, now, now, limit])
            return rows.map(Self.scheduleRow).sorted { $0.schedule.sendAt < $1.schedule.sendAt }
        }
    }

    public func finishSchedule(id: String, worker: String, state: String, error: String?,
                               now: Int64) async throws(StoreError) -> Bool {
        try await write("finish a schedule") { db in
            try db.execute(sql: """
                UPDATE scheduled_notifications SET state = ?, error = ?, finished_at = ?, lease_owner = NULL, lease_until = NULL
                WHERE id = ? AND state = 'sending' AND lease_owner = ?
                """, arguments: [state, error, now, id, worker])
            return db.changesCount == 1
        }
    }

    public func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow? {
        try await write("cancel a schedule") { db in
            try db.execute(sql: """
                UPDATE scheduled_notifications SET state = 'cancelled', finished_at = ? WHERE id = ? AND state = 'scheduled'
                """, arguments: [now, id])
            return try Row.fetchOne(db, sql: "SELECT \(Self.scheduleColumns) FROM scheduled_notifications WHERE id = ?",
                                    arguments: [id]).map(Self.scheduleRow)
        }
    }

    public func scheduled(id: String) async throws(StoreError) -> ScheduleRow? {
        try await read("read a schedule") { db in
            try Row.fetchOne(db, sql: "SELECT \(Self.scheduleColumns) FROM scheduled_notifications WHERE id = ?",
                             arguments: [id]).map(Self.scheduleRow)
        }
    }

    public func pendingSchedules() async throws(StoreError) -> Int {
        try await read("count schedules") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM scheduled_notifications WHERE state IN ('scheduled', 'sending')") ?? 0
        }
    }

    public func pruneSchedules(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune schedules") { db in
            try db.execute(sql: """
                DELETE FROM scheduled_notifications WHERE id IN (
                    SELECT id FROM scheduled_notifications
                    WHERE state NOT IN ('scheduled', 'sending') AND finished_at < ? ORDER BY finished_at LIMIT ?)
                """, arguments: [cutoff, limit])
            return db.changesCount
        }
    }
}
