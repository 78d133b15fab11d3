import GRDB

// Webhook events on SQLite: written inside the transactions that make the changes
// they report (the `record…` functions, called by finish and finishBroadcast), and
// claimed and finished by the webhook worker like a small outbox of their own.

extension SQLiteStore {
    public func routeWebhooks(_ routes: WebhookRoutes) { webhookRouting.set(routes) }

    /// A new event id, random, per row.
    static let eventIDSQL = "'evt_' || lower(hex(randomblob(12)))"

    /// Milliseconds since 1970 as the API's time text ("2026-11-22T21:28:00.123Z").
    static func iso(_ millis: String) -> String {
        "strftime('%Y-%m-%dT%H:%M:%fZ', (\(millis)) / 1000.0, 'unixepoch')"
    }

    /// `delivery.failed` for each of these deliveries that failed (their results
    /// written in this transaction).
    static func recordFailedDeliveries(_ db: Database, _ routes: WebhookRoutes, ids: [Int64], now: Int64) throws {
        let urls = routes.urls(for: .deliveryFailed)
        guard !urls.isEmpty, !ids.isEmpty else { return }
        try db.cachedStatement(sql: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.value, 'delivery.failed', 'delivery:' || d.id,
                   json_object('notification_id', d.notification_id, 'type', n.type, 'app_type', n.app_type,
                               'entity_type', n.entity_type, 'entity_id', n.entity_id, 'apns_id', d.apns_id,
                               'user_id', d.user_id, 'token', d.token, 'environment', d.environment,
                               'status', r.status, 'reason', r.reason, 'attempts', r.attempts,
                               'failed_at', \(iso("r.finished_at"))),
                   ?3, ?3
            FROM json_each(?1) i
            CROSS JOIN results r ON r.delivery_id = i.value
            CROSS JOIN deliveries d ON d.id = r.delivery_id
            CROSS JOIN notifications n ON n.id = d.notification_id
            CROSS JOIN json_each(?2) e
            WHERE r.state = 'failed'
            ON CONFLICT DO NOTHING
            """).execute(arguments: [jsonArray(ids), jsonArray(urls), now])
    }

    /// `token.deactivated` for the device if this transaction deactivated it (its
    /// `deactivated_at` is `now`); `apnsTimestamp` is APNs' time of the 410, if any.
    static func recordDeactivation(_ db: Database, _ routes: WebhookRoutes, deviceID: Int64, apnsTimestamp: Int64?,
                                   now: Int64) throws {
        let urls = routes.urls(for: .tokenDeactivated)
        guard !urls.isEmpty else { return }
        try db.cachedStatement(sql: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.value, 'token.deactivated', 'device:' || v.id || ':' || v.deactivated_at,
                   json_object('token', v.token, 'user_id', v.user_id, 'app_type', v.app_type,
                               'platform', v.platform, 'environment', v.environment, 'reason', v.deactivated_reason,
                               'apns_timestamp', \(iso("?4")), 'deactivated_at', \(iso("v.deactivated_at"))),
                   ?3, ?3
            FROM devices v CROSS JOIN json_each(?2) e
            WHERE v.id = ?1 AND v.is_active = 0 AND v.deactivated_at = ?3
            ON CONFLICT DO NOTHING
            """).execute(arguments: [deviceID, jsonArray(urls), now, apnsTimestamp])
    }

    /// Marks the notifications of these finished deliveries (and of those they
    /// carried) to be looked at by `completeNotifications`.
    static func recordCompletionChecks(_ db: Database, _ routes: WebhookRoutes, ids: [Int64], now: Int64) throws {
        guard !routes.urls(for: .notificationCompleted).isEmpty, !ids.isEmpty else { return }
        try db.cachedStatement(sql: """
            INSERT INTO webhook_checks (notification_id, check_at)
            SELECT notification_id, ?2 FROM (
                SELECT notification_id FROM deliveries WHERE id IN (SELECT value FROM json_each(?1))
                UNION
                SELECT notification_id FROM deliveries WHERE carried_by IN (SELECT value FROM json_each(?1))
            ) WHERE true
            ON CONFLICT (notification_id) DO UPDATE SET check_at = excluded.check_at
            """).execute(arguments: [jsonArray(ids), now])
    }

    /// `broadcast.completed` for the broadcast just finished.
    static func recordBroadcast(_ db: Database, _ routes: WebhookRoutes, id: String, now: Int64) throws {
        let urls = routes.urls(for: .broadcastCompleted)
        guard !urls.isEmpty else { return }
        try db.cachedStatement(sql: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.value, 'broadcast.completed', 'broadcast:' || b.id,
                   json_object('broadcast_id', b.id, 'app_type', b.app_type, 'environment', b.environment,
                               'entity_type', b.entity_type, 'entity_id', b.entity_id, 'channel_id', b.channel_id,
                               'state', b.state, 'status', b.status, 'reason', b.reason, 'request_id', b.request_id,
                               'attempts', b.attempts, 'created_at', \(iso("b.created_at")),
                               'finished_at', \(iso("b.finished_at"))),
                   ?3, ?3
            FROM broadcasts b CROSS JOIN json_each(?2) e
            WHERE b.id = ?1 AND b.state <> 'pending'
            ON CONFLICT DO NOTHING
            """).execute(arguments: [id, jsonArray(urls), now])
    }

    public func completeNotifications(limit: Int, recheckMillis: Int64, now: Int64) async throws(StoreError) -> Int {
        let urls = webhookRouting.current.urls(for: .notificationCompleted)
        let due = try await read("read webhook checks") { db in
            try String.fetchAll(db, sql: """
                SELECT notification_id FROM webhook_checks WHERE check_at <= ? ORDER BY check_at LIMIT ?
                """, arguments: [now, limit])
        }
        var completed = 0
        for id in due {
            // Looked at under the writer: a finish or a cancel that ended the last
            // pending delivery either committed before (and is seen here) or marks the
            // check again after. (A look before taking the writer could be stale, and
            // a mark in the same millisecond would not tell.) The look goes from the
            // newest delivery back (the oldest are sent first), so a large
            // notification still sending is found pending at once.
            let done = try await write("complete notification \(id)") { db -> Bool in
                if try Self.hasPending(db, id) {
                    try db.execute(sql: "UPDATE webhook_checks SET check_at = ? WHERE notification_id = ?",
                                   arguments: [now + recheckMillis, id])
                    return false
                }
                if !urls.isEmpty {
                    try db.execute(sql: """
                        INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
                        SELECT \(Self.eventIDSQL), e.value, 'notification.completed', 'notification:' || n.id,
                               json_object('notification_id', n.id, 'type', n.type, 'app_type', n.app_type,
                                           'entity_type', n.entity_type, 'entity_id', n.entity_id,
                                           'created_at', \(Self.iso("n.created_at")), 'completed_at', \(Self.iso("?3")),
                                           'summary', json((SELECT json_group_object(state, count) FROM (
                                               SELECT coalesce(r.state, d.state) AS state, count(*) AS count
                                               FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                                               WHERE d.notification_id = n.id GROUP BY 1)))),
                               ?3, ?3
                        FROM notifications n CROSS JOIN json_each(?2) e
                        WHERE n.id = ?1
                        ON CONFLICT DO NOTHING
                        """, arguments: [id, jsonArray(urls), now])
                }
                try db.execute(sql: "DELETE FROM webhook_checks WHERE notification_id = ?", arguments: [id])
                return true
            }
            if done { completed += 1 }
        }
        return completed
    }

    /// A delivery still in the outbox, or a plan not yet complete (its deliveries
    /// are not in the outbox yet: see `FanOutPlans`).
    private static func hasPending(_ db: Database, _ notificationID: String) throws -> Bool {
        try Bool.fetchOne(db, sql: """
            SELECT EXISTS (SELECT 1 FROM deliveries d
                           WHERE d.notification_id = ?1 AND EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id)
                           ORDER BY d.id DESC)
                OR EXISTS (SELECT 1 FROM notifications WHERE id = ?1 AND planning_until IS NOT NULL)
            """, arguments: [notificationID]) ?? false
    }

    public func claimWebhookEvents(worker: String, limit: Int, leaseMillis: Int64,
                                   now: Int64) async throws(StoreError) -> [WebhookEvent] {
        guard limit > 0 else { return [] }
        return try await write("claim webhook events") { db in
            try Row.fetchAll(db, sql: """
                UPDATE webhook_events SET lease_until = ?1, claimed_by = ?2
                WHERE id IN (SELECT id FROM webhook_events
                             WHERE state = 'pending' AND available_at <= ?3 AND (claimed_by IS NULL OR lease_until <= ?3)
                             ORDER BY available_at, id LIMIT ?4)
                RETURNING id, event_id, endpoint, type, data, created_at, attempts
                """, arguments: [now + leaseMillis, worker, now, limit]).map(WebhookEvent.init(row:))
                .sorted { $0.id < $1.id }
        }
    }

    public func finishWebhookEvents(worker: String, _ ends: [WebhookAttemptEnd],
                                    now: Int64) async throws(StoreError) {
        guard !ends.isEmpty else { return }
        try await write("finish webhook events") { db in
            try db.cachedStatement(sql: """
                UPDATE webhook_events
                SET state = e.state, attempts = attempts + 1, last_status = e.status, last_error = e.error,
                    available_at = coalesce(e.available_at, webhook_events.available_at),
                    finished_at = e.finished_at, lease_until = NULL, claimed_by = NULL
                FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.state') AS state,
                             json_extract(value, '$.status') AS status, json_extract(value, '$.error') AS error,
                             json_extract(value, '$.available_at') AS available_at,
                             json_extract(value, '$.finished_at') AS finished_at
                      FROM json_each(?1)) AS e
                WHERE webhook_events.id = e.id AND webhook_events.claimed_by = ?2 AND webhook_events.state = 'pending'
                """).execute(arguments: [WebhookAttemptEnd.rows(ends, now: now), worker])
        }
    }

    public func webhookEvents(state: String?, limit: Int, after: Int64?) async throws(StoreError) -> [WebhookEventView] {
        try await read("list webhook events") { db in
            try Row.fetchAll(db, sql: """
                SELECT id, event_id, endpoint, type, data, created_at, attempts, state, last_status, last_error,
                       finished_at, available_at
                FROM webhook_events WHERE (?1 IS NULL OR state = ?1) AND id > ?2 ORDER BY id LIMIT ?3
                """, arguments: [state, after ?? 0, limit]).map(WebhookEventView.init(row:))
        }
    }

    public func webhookEventCounts() async throws(StoreError) -> [String: Int] {
        try await read("count webhook events") { db in
            var counts: [String: Int] = ["pending": 0, "failed": 0]
            for row in try Row.fetchAll(db, sql: """
                SELECT state, count(*) FROM webhook_events WHERE state IN ('pending', 'failed') GROUP BY state
                """) {
                counts[row[0]] = row[1]
            }
            return counts
        }
    }

    public func pruneWebhookEvents(finishedBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune webhook events") { db in
            try db.execute(sql: """
                DELETE FROM webhook_events WHERE id IN (
                    SELECT id FROM webhook_events WHERE state IN ('delivered', 'failed') AND finished_at < ? LIMIT ?)
                """, arguments: [cutoff, limit])
            return db.changesCount
        }
    }
}

extension WebhookEvent {
    init(row: Row) {
        self.init(id: row[0], eventID: row[1], endpoint: row[2], type: row[3], data: row[4], createdAt: row[5],
                  attempts: row[6])
    }
}

extension WebhookEventView {
    init(row: Row) {
        self.init(event: WebhookEvent(row: row), state: row[7], lastStatus: row[8], lastError: row[9],
                  finishedAt: row[10], availableAt: row[11], cursor: row[0])
    }
}
