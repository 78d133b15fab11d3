/// Scheduled sends (`ScheduledSends`) as both engines store them: the row's mapping
/// once, and each statement's two spellings side by side where they differ.
extension ScheduleRow {
    /// A schedule from its row: the columns `Statements.scheduleColumns` names, in order.
    init<R: StoreRow>(_ row: R) throws {
        self.init(schedule: NewSchedule(id: try row.string(0), kind: try row.string(1), appType: try row.string(2),
                                        type: try row.string(3), scheduleKey: try row.optionalString(4),
                                        request: R.array(try row.bytes(5)), sendAt: try row.int64(6)),
                  createdAt: try row.int64(7), state: try row.string(8), supersededBy: try row.optionalString(9),
                  finishedAt: try row.optionalInt64(10), error: try row.optionalString(11))
    }
}

extension Statements {
    /// A schedule's columns, the same on both engines (read by `ScheduleRow.init`).
    static let scheduleColumns = """
        id, kind, app_type, type, schedule_key, request, send_at, created_at, state, superseded_by, finished_at, error
        """
}

enum ScheduleStatements {
    /// The app's pending schedule of this kind with this key becomes superseded by a
    /// new one: 1 the new one's id, 2 now, 3 the app, 4 the key, 5 the kind
    /// (`notification` or `live_activity`: a key names a schedule of one kind);
    /// returns the old one's id.
    static let supersede = Spelling("""
        UPDATE scheduled_notifications SET state = 'superseded', superseded_by = $1, finished_at = $2
        WHERE app_type = $3 AND schedule_key = $4 AND kind = $5 AND state = 'scheduled' RETURNING id
        """)

    /// PostgreSQL only (SQLite has one writer at a time, and never runs it): the
    /// key's transaction-scoped lock, taken before the supersede, so that two
    /// schedules with one key, on any instances, go one after the other. Under READ
    /// COMMITTED the second's UPDATE could not see a row the first inserted and has
    /// not committed; it would then supersede nothing, and its insert would fail on
    /// the pending keys' unique index. With the lock, its UPDATE starts after that
    /// commit and sees the row. 1 the app, 2 the kind, 3 the key. Two names with one
    /// hash only wait on each other.
    static let lockKey = Spelling.only(
        postgres: """
            SELECT pg_advisory_xact_lock(hashtextextended('schedule' || chr(31) || $1 || chr(31) || $2 || chr(31) || $3, 0))
            """)

    /// 1 id, 2 kind, 3 app, 4 type, 5 key, 6 request, 7 send_at, 8 now.
    static let insert = Spelling("""
        INSERT INTO scheduled_notifications (id, kind, app_type, type, schedule_key, request, send_at, created_at, state)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'scheduled')
        """)

    /// Due schedules and those whose worker's lease ran out, oldest first, leased to
    /// a worker: 1 the worker, 2 the lease's end, 3 now, 4 the limit. PostgreSQL
    /// instances claiming at once take different rows (SKIP LOCKED).
    static let claimDue = Spelling(
        sqlite: """
            UPDATE scheduled_notifications SET state = 'sending', lease_owner = ?1, lease_until = ?2
            WHERE id IN (SELECT id FROM scheduled_notifications
                         WHERE (state = 'scheduled' AND send_at <= ?3) OR (state = 'sending' AND lease_until <= ?3)
                         ORDER BY send_at LIMIT ?4)
            RETURNING \(Statements.scheduleColumns)
            """,
        postgres: """
            UPDATE scheduled_notifications SET state = 'sending', lease_owner = $1, lease_until = $2
            WHERE id IN (SELECT id FROM scheduled_notifications
                         WHERE (state = 'scheduled' AND send_at <= $3) OR (state = 'sending' AND lease_until <= $3)
                         ORDER BY send_at LIMIT $4 FOR UPDATE SKIP LOCKED)
            RETURNING \(Statements.scheduleColumns)
            """)

    /// Its final state, if this worker still holds it: 1 state, 2 error, 3 now, 4 id,
    /// 5 the worker; a row when it did.
    static let finish = Spelling("""
        UPDATE scheduled_notifications SET state = $1, error = $2, finished_at = $3, lease_owner = NULL, lease_until = NULL
        WHERE id = $4 AND state = 'sending' AND lease_owner = $5 RETURNING 1
        """)

    /// Cancelled if it still waits: 1 now, 2 id.
    static let cancel = Spelling("""
        UPDATE scheduled_notifications SET state = 'cancelled', finished_at = $1 WHERE id = $2 AND state = 'scheduled'
        """)

    /// 1 id.
    static let byID = Spelling("SELECT \(Statements.scheduleColumns) FROM scheduled_notifications WHERE id = $1")

    /// Those not final.
    static let pending = Spelling("SELECT count(*) FROM scheduled_notifications WHERE state IN ('scheduled', 'sending')")

    /// Up to 2 final schedules finished before 1, oldest first; one row each.
    /// PostgreSQL instances pruning at once take different rows.
    static let prune = Spelling(
        sqlite: """
            DELETE FROM scheduled_notifications WHERE id IN (
                SELECT id FROM scheduled_notifications
                WHERE state NOT IN ('scheduled', 'sending') AND finished_at < ?1 ORDER BY finished_at LIMIT ?2)
            RETURNING 1
            """,
        postgres: """
            DELETE FROM scheduled_notifications WHERE id IN (
                SELECT id FROM scheduled_notifications
                WHERE state NOT IN ('scheduled', 'sending') AND finished_at < $1
                ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING 1
            """)
}
