import Foundation
import GRDB

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
