import Foundation
import GRDB

extension SQLiteStore: ScheduledSends {
    public func schedule(_ s: NewSchedule, now: Int64) async throws(StoreError) -> String? {
        try await write("schedule a notification") { db in
            var superseded: String?
            if let key = s.scheduleKey {
                superseded = try String.fetchOne(db, sql: Statements.supersedeSchedule.sqlite,
                                                 arguments: [s.id, now, s.appType, key, s.kind])
            }
            try db.execute(sql: Statements.insertSchedule.sqlite,
                           arguments: [s.id, s.kind, s.appType, s.type, s.scheduleKey, Data(s.request), s.sendAt, now])
            return superseded
        }
    }

    public func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                                  now: Int64) async throws(StoreError) -> [ScheduleRow] {
        try await write("claim due schedules") { db in
            try Row.fetchAll(db, sql: Statements.claimDueSchedules.sqlite,
                             arguments: [worker, now + leaseMillis, now, limit])
                .map(ScheduleRow.init).sorted { $0.schedule.sendAt < $1.schedule.sendAt }
        }
    }

    public func finishSchedule(id: String, worker: String, state: String, error: String?,
                               now: Int64) async throws(StoreError) -> Bool {
        try await write("finish a schedule") { db in
            try !Row.fetchAll(db, sql: Statements.finishSchedule.sqlite, arguments: [state, error, now, id, worker]).isEmpty
        }
    }

    public func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow? {
        try await write("cancel a schedule") { db in
            try db.execute(sql: Statements.cancelSchedule.sqlite, arguments: [now, id])
            return try Row.fetchOne(db, sql: Statements.scheduleByID.sqlite, arguments: [id]).map(ScheduleRow.init)
        }
    }

    public func scheduled(id: String) async throws(StoreError) -> ScheduleRow? {
        try await read("read a schedule") { db in
            try Row.fetchOne(db, sql: Statements.scheduleByID.sqlite, arguments: [id]).map(ScheduleRow.init)
        }
    }

    public func pendingSchedules() async throws(StoreError) -> Int {
        try await read("count schedules") { db in try Int.fetchOne(db, sql: Statements.pendingSchedules) ?? 0 }
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
