import PostgresNIO

extension PostgresStore: ScheduledSends {
    /// As SQLite's. Schedules with one key, on any instances, take the key's lock
    /// first (`Statements.lockScheduleKey`): each supersedes the one committed before it.
    public func schedule(_ s: NewSchedule, now: Int64) async throws(StoreError) -> String? {
        try await transaction("schedule a notification") { db in
            var superseded: String?
            if let key = s.scheduleKey {
                var lock = PostgresBindings(capacity: 3)
                lock.append(s.appType)
                lock.append(s.kind)
                lock.append(key)
                try await db.run(PostgresQuery(unsafeSQL: Statements.lockScheduleKey, binds: lock))
                var binds = PostgresBindings(capacity: 5)
                binds.append(s.id)
                binds.append(now)
                binds.append(s.appType)
                binds.append(key)
                binds.append(s.kind)
                superseded = try await db.rows(PostgresQuery(unsafeSQL: Statements.supersedeSchedule.postgres, binds: binds))
                    .first?.get(0, String.self)
            }
            var binds = PostgresBindings(capacity: 8)
            binds.append(s.id)
            binds.append(s.kind)
            binds.append(s.appType)
            binds.append(s.type)
            binds.append(s.scheduleKey)
            binds.append(ByteBuffer(bytes: s.request))
            binds.append(s.sendAt)
            binds.append(now)
            try await db.run(PostgresQuery(unsafeSQL: Statements.insertSchedule.postgres, binds: binds))
            return superseded
        }
    }

    public func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                                  now: Int64) async throws(StoreError) -> [ScheduleRow] {
        try await transaction("claim due schedules") { db in
            var binds = PostgresBindings(capacity: 4)
            binds.append(worker)
            binds.append(now + leaseMillis)
            binds.append(now)
            binds.append(Int64(limit))
            return try await db.rows(PostgresQuery(unsafeSQL: Statements.claimDueSchedules.postgres, binds: binds))
                .map(ScheduleRow.init).sorted { $0.schedule.sendAt < $1.schedule.sendAt }
        }
    }

    public func finishSchedule(id: String, worker: String, state: String, error: String?,
                               now: Int64) async throws(StoreError) -> Bool {
        try await transaction("finish a schedule") { db in
            var binds = PostgresBindings(capacity: 5)
            binds.append(state)
            binds.append(error)
            binds.append(now)
            binds.append(id)
            binds.append(worker)
            return !(try await db.rows(PostgresQuery(unsafeSQL: Statements.finishSchedule.postgres, binds: binds))).isEmpty
        }
    }

    public func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow? {
        try await transaction("cancel a schedule") { db in
            var binds = PostgresBindings(capacity: 2)
            binds.append(now)
            binds.append(id)
            try await db.run(PostgresQuery(unsafeSQL: Statements.cancelSchedule.postgres, binds: binds))
            return try await Self.schedule(db, id: id)
        }
    }

    public func scheduled(id: String) async throws(StoreError) -> ScheduleRow? {
        try await transaction("read a schedule") { db in try await Self.schedule(db, id: id) }
    }

    private static func schedule(_ db: PostgresConnection, id: String) async throws -> ScheduleRow? {
        var binds = PostgresBindings(capacity: 1)
        binds.append(id)
        return try await db.rows(PostgresQuery(unsafeSQL: Statements.scheduleByID.postgres, binds: binds))
            .first.map(ScheduleRow.init)
    }

    public func pendingSchedules() async throws(StoreError) -> Int {
        try await transaction("count schedules") { db in
            try await db.rows(PostgresQuery(unsafeSQL: Statements.pendingSchedules, binds: PostgresBindings()))[0]
                .get(0, Int.self)
        }
    }

    public func pruneSchedules(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await transaction("prune schedules") { db in
            try await db.rows("""
                WITH gone AS (
                    DELETE FROM scheduled_notifications WHERE id IN (
                        SELECT id FROM scheduled_notifications
                        WHERE state NOT IN ('scheduled', 'sending') AND finished_at < \(cutoff)
                        ORDER BY finished_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                    RETURNING 1)
                SELECT count(*) FROM gone
                """)[0].get(0, Int.self)
        }
    }
}
