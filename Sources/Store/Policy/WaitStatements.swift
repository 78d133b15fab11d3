/// `WaitViewStore`'s statements, each engine's spelling side by side, and their
/// rows' mapping once.
extension Statements {
    /// The outbox rows of deliveries: 1 their apns-ids (a JSON array on SQLite, an
    /// array on PostgreSQL). Columns: apns-id, app, available_at, lease_until.
    static let outboxPlaces = Spelling(
        sqlite: """
            SELECT d.apns_id, n.app_type, o.available_at, o.lease_until
            FROM deliveries d JOIN notifications n ON n.id = d.notification_id
            LEFT JOIN outbox o ON o.delivery_id = d.id
            WHERE d.apns_id IN (SELECT value FROM json_each(?1))
            """,
        postgres: """
            SELECT d.apns_id, n.app_type, o.available_at, o.lease_until
            FROM deliveries d JOIN notifications n ON n.id = d.notification_id
            LEFT JOIN outbox o ON o.delivery_id = d.id
            WHERE d.apns_id = ANY($1::text[])
            """)

    /// The payload of a notification's first delivery: 1 the notification.
    static let notificationPayload = Spelling(
        sqlite: """
            SELECT coalesce(p.bytes, d.payload) FROM deliveries d LEFT JOIN payloads p ON p.id = d.payload_id
            WHERE d.notification_id = ?1 ORDER BY d.id LIMIT 1
            """,
        postgres: """
            SELECT coalesce(p.bytes, d.payload) FROM deliveries d LEFT JOIN payloads p ON p.id = d.payload_id
            WHERE d.notification_id = $1 ORDER BY d.id LIMIT 1
            """)

    /// Schedules not final, soonest first, after a place in that order: 1 the app
    /// (NULL: every app), 2 and 3 the place (send time, id), 4 how many. The state
    /// test is the partial index's own (`scheduled_notifications_due`); ids compare
    /// byte by byte on both engines.
    static let upcomingSchedules = Spelling(
        sqlite: """
            SELECT \(scheduleColumns) FROM scheduled_notifications
            WHERE state IN ('scheduled', 'sending') AND (?1 IS NULL OR app_type = ?1)
              AND (send_at > ?2 OR (send_at = ?2 AND id > ?3))
            ORDER BY send_at, id LIMIT ?4
            """,
        postgres: """
            SELECT \(scheduleColumns) FROM scheduled_notifications
            WHERE state IN ('scheduled', 'sending') AND ($1::text IS NULL OR app_type = $1)
              AND (send_at > $2 OR (send_at = $2 AND id COLLATE "C" > $3))
            ORDER BY send_at, id COLLATE "C" LIMIT $4
            """)
}

extension OutboxPlace {
    /// From `Statements.outboxPlaces`' columns.
    init<R: StoreRow>(_ row: R) throws {
        self.init(apnsID: try row.string(0), appType: try row.string(1), availableAt: try row.optionalInt64(2),
                  leaseUntil: try row.optionalInt64(3))
    }
}

extension Page where Item == ScheduleRow, Cursor == TimeCursor {
    /// A page of `upcomingSchedules`, read up to `limit + 1` rows.
    init(upcoming rows: [ScheduleRow], limit: Int) {
        self.init(rows: rows, limit: limit) { TimeCursor(millis: rows[$0].schedule.sendAt, id: rows[$0].schedule.id) }
    }

    /// Where the first page starts: before every schedule.
    static var start: TimeCursor { TimeCursor(millis: Int64.min, id: "") }
}
