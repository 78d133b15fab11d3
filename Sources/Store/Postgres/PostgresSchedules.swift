import PostgresNIO

extension PostgresStore: ScheduledSends {
    static func scheduleRow(_ row: PostgresRandomAccessRow) throws -> ScheduleRow {
        ScheduleRow(schedule: NewSchedule(id: try row.get(0), kind: try row.get(1), appType: try row.get(2),
                                          type: try row.get(3), scheduleKey: try row.get(4),
                                          request: Array(try row.get(5, ByteBuffer.self).readableBytesView),
                                          sendAt: try row.get(6)),
                    createdAt: try row.get(7), state: try row.get(8), supersededBy: try row.get(9),
                    finishedAt: try row.get(10), error: try row.get(11))
    }

    /// As SQLite's. Two instances scheduling the same key at once: the unique index
    /// of pending keys makes the second wait, then supersede the first's.
    public func schedule(_ s: NewSchedule, now: Int64) async throws(StoreError) -> String? {
        try await transaction("schedule a notification") { db in
            var superseded: String?
            if let key = s.scheduleKey {
                superseded = try await db.rows("""
                    UPDATE scheduled_notifications SET state = 'superseded', superseded_by = \(s.id), finished_at = \(now)
                    WHERE app_type = \(s.appType) AND schedule_key = \(key) AND state = 'scheduled' RETURNING id
                    """).first?.get(0, String.self)
            }
            try await db.run("""
                INSERT INTO scheduled_notifications (id, kind, app_type, type, schedule_key, request, send_at, created_at, state)
                VALUES (\(s.id), \(s.kind), \(s.appType), \(s.type), \(s.scheduleKey), \(ByteBuffer(bytes: s.request)),
                        \(s.sendAt), \(now), 'scheduled')
                """)
            return superseded
        }
    }

    /// Instances claiming at once take different rows (`SKIP LOCKED`).
    public func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                                  now: Int64) async throws(StoreError) -> [ScheduleRow] {
        try await transaction("claim due schedules") { db in
            try await db.rows("""
                UPDATE scheduled_notifications SET state = 'sending', lease_owner = \(worker), lease_until = \(now + leaseMillis)
                WHERE id IN (SELECT id FROM scheduled_notifications
                             WHERE (state = 'scheduled' AND send_at <= \(now)) OR (state = 'sending' AND lease_until <= \(now))
                             ORDER BY send_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING id, kind, app_type, type, schedule_key, request, send_at, created_at, state, superseded_by,
                          finished_at, error
                """).map(Self.scheduleRow).sorted { $0.schedule.sendAt < $1.schedule.sendAt }
        }
    }

    public func finishSchedule(id: String, worker: String, state: String, error: String?,
                               now: Int64) async throws(StoreError) -> Bool {
        try await transaction("finish a schedule") { db in
            !(try await db.rows("""
                UPDATE scheduled_notifications
                SET state = \(state), error = \(error), finished_at = \(now), lease_owner = NULL, lease_until = NULL
                WHERE id = \(id) AND state = 'sending' AND lease_owner = \(worker) RETURNING 1
                """)).isEmpty
        }
    }

    public func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow? {
        try await transaction("cancel a schedule") { db in
            try await db.run("""
                UPDATE scheduled_notifications SET state = 'cancelled', finished_at = \(now)
                WHERE id = \(id) AND state = 'scheduled'
                """)
            return try await db.rows("""
                SELECT id, kind, app_type, type, schedule_key, request, send_at, created_at, state, superseded_by,
                       finished_at, error
                FROM scheduled_notifications WHERE id = \(id)
                """).first.map(Self.scheduleRow)
        }
    }

    public func scheduled(id: String) async throws(StoreError) -> ScheduleRow? {
        try await transaction("read a schedule") { db in
            try await db.rows("""
                SELECT id, kind, app_type, type, schedule_key, request, send_at, created_at, state, superseded_by,
                       finished_at, error
                FROM scheduled_notifications WHERE id = \(id)
                """).first.map(Self.scheduleRow)
        }
    }

    public func pendingSchedules() async throws(StoreError) -> Int {
        try await transaction("count schedules") { db in
            try await db.rows("""
                SELECT count(*) FROM scheduled_notifications WHERE state IN ('scheduled', 'sending')
                """)[0].get(0, Int.self)
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
