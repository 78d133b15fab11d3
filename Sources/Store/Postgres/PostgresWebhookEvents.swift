import PostgresNIO

// Webhook events on PostgreSQL: the same rows and meanings as on SQLite (see
// WebhookOutbox.swift), written in the transactions of the changes they report and
// claimed with SKIP LOCKED, so that the workers of several instances never send one
// event at once.

extension PostgresStore {
    public func routeWebhooks(_ routes: WebhookRoutes) { webhookRouting.set(routes) }

    /// A new event id, random, per row.
    static let eventIDSQL = "'evt_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)"

    /// Milliseconds since 1970 (a bigint expression) as the API's time text.
    static func iso(_ millis: String) -> String {
        "(to_char(to_timestamp((\(millis)) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || '.' "
            + "|| lpad(((\(millis)) % 1000)::text, 3, '0') || 'Z')"
    }

    /// `delivery.failed` for each of these deliveries that failed (results written in this transaction).
    static func recordFailedDeliveries(_ db: PostgresConnection, _ routes: WebhookRoutes, ids: [Int64],
                                       now: Int64) async throws {
        let urls = routes.urls(for: .deliveryFailed)
        guard !urls.isEmpty, !ids.isEmpty else { return }
        var binds = PostgresBindings(capacity: 3)
        binds.append(ids)
        binds.append(urls)
        binds.append(now)
        try await db.run(PostgresQuery(unsafeSQL: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.url, 'delivery.failed', 'delivery:' || d.id,
                   json_build_object('notification_id', d.notification_id, 'type', n.type, 'app_type', n.app_type,
                                     'entity_type', n.entity_type, 'entity_id', n.entity_id, 'apns_id', d.apns_id,
                                     'user_id', d.user_id, 'token', d.token, 'environment', d.environment,
                                     'status', r.status, 'reason', r.reason, 'attempts', r.attempts,
                                     'failed_at', \(iso("r.finished_at")))::text,
                   $3::bigint, $3::bigint
            FROM results r
            JOIN deliveries d ON d.id = r.delivery_id
            JOIN notifications n ON n.id = d.notification_id
            CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE r.delivery_id = ANY($1::bigint[]) AND r.state = 'failed'
            ON CONFLICT DO NOTHING
            """, binds: binds))
    }

    /// `token.deactivated` for the device if this transaction deactivated it.
    static func recordDeactivation(_ db: PostgresConnection, _ routes: WebhookRoutes, deviceID: Int64,
                                   apnsTimestamp: Int64?, now: Int64) async throws {
        let urls = routes.urls(for: .tokenDeactivated)
        guard !urls.isEmpty else { return }
        var binds = PostgresBindings(capacity: 4)
        binds.append(deviceID)
        binds.append(urls)
        binds.append(now)
        binds.append(apnsTimestamp)
        try await db.run(PostgresQuery(unsafeSQL: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.url, 'token.deactivated', 'device:' || v.id || ':' || v.deactivated_at,
                   json_build_object('token', v.token, 'user_id', v.user_id, 'app_type', v.app_type,
                                     'platform', v.platform, 'environment', v.environment,
                                     'reason', v.deactivated_reason, 'apns_timestamp', \(iso("$4::bigint")),
                                     'deactivated_at', \(iso("v.deactivated_at")))::text,
                   $3::bigint, $3::bigint
            FROM devices v CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE v.id = $1::bigint AND NOT v.is_active AND v.deactivated_at = $3::bigint
            ON CONFLICT DO NOTHING
            """, binds: binds))
    }

    /// Marks the notifications of these finished deliveries (and of those they
    /// carried) to be looked at by `completeNotifications`.
    static func recordCompletionChecks(_ db: PostgresConnection, _ routes: WebhookRoutes, ids: [Int64],
                                       now: Int64) async throws {
        guard !routes.urls(for: .notificationCompleted).isEmpty, !ids.isEmpty else { return }
        // Sorted, so that finishes of one notification lock its check row in one order.
        try await db.run("""
            INSERT INTO webhook_checks (notification_id, check_at)
            SELECT notification_id, \(now)::bigint FROM (
                SELECT notification_id FROM deliveries WHERE id = ANY(\(ids)::bigint[])
                UNION
                SELECT notification_id FROM deliveries WHERE carried_by = ANY(\(ids)::bigint[])
            ) t ORDER BY notification_id
            ON CONFLICT (notification_id) DO UPDATE SET check_at = excluded.check_at
            """)
    }

    /// `broadcast.completed` for the broadcast just finished.
    static func recordBroadcast(_ db: PostgresConnection, _ routes: WebhookRoutes, id: String, now: Int64) async throws {
        let urls = routes.urls(for: .broadcastCompleted)
        guard !urls.isEmpty else { return }
        var binds = PostgresBindings(capacity: 3)
        binds.append(id)
        binds.append(urls)
        binds.append(now)
        try await db.run(PostgresQuery(unsafeSQL: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(eventIDSQL), e.url, 'broadcast.completed', 'broadcast:' || b.id,
                   json_build_object('broadcast_id', b.id, 'app_type', b.app_type, 'environment', b.environment,
                                     'entity_type', b.entity_type, 'entity_id', b.entity_id, 'channel_id', b.channel_id,
                                     'state', b.state, 'status', b.status, 'reason', b.reason,
                                     'request_id', b.request_id, 'attempts', b.attempts,
                                     'created_at', \(iso("b.created_at")), 'finished_at', \(iso("b.finished_at")))::text,
                   $3::bigint, $3::bigint
            FROM broadcasts b CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE b.id = $1::text AND b.state <> 'pending'
            ON CONFLICT DO NOTHING
            """, binds: binds))
    }

    /// `finishBroadcast` where a receiver wants `broadcast.completed`: the entry and
    /// its event in one transaction.
    func finishBroadcastRecordingEvent(worker: String, _ o: BroadcastOutcome, routes: WebhookRoutes,
                                       now: Int64) async throws(StoreError) -> Bool {
        try await transaction("finish a broadcast") { db in
            let finished = try await db.rows("""
                UPDATE broadcasts SET state = \(o.delivered ? "delivered" : "failed"), status = \(Int64(o.status)),
                                      reason = \(o.reason)::text, request_id = \(o.requestID)::text,
                                      unique_id = \(o.uniqueID)::text, attempts = \(Int64(o.attempts)),
                                      finished_at = \(now), lease_until = NULL, claimed_by = NULL
                WHERE id = \(o.id) AND state = 'pending' AND claimed_by = \(worker)
                RETURNING id
                """).count == 1
            if finished { try await Self.recordBroadcast(db, routes, id: o.id, now: now) }
            return finished
        }
    }

    public func completeNotifications(limit: Int, recheckMillis: Int64, now: Int64) async throws(StoreError) -> Int {
        let urls = webhookRouting.current.urls(for: .notificationCompleted)
        // One transaction per pass: the checks due, locked (another instance's pass
        // skips them), each either completed (its events written once, the check
        // deleted) or put off.
        return try await transaction("complete notifications") { db in
            let due = try await db.rows("""
                SELECT notification_id FROM webhook_checks WHERE check_at <= \(now)
                ORDER BY check_at LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED
                """).map { try $0.get(0, String.self) }
            guard !due.isEmpty else { return 0 }
            let pending = Set(try await db.rows("""
                SELECT DISTINCT d.notification_id FROM deliveries d JOIN outbox o ON o.delivery_id = d.id
                WHERE d.notification_id = ANY(\(due)::text[])
                UNION
                SELECT id FROM notifications WHERE id = ANY(\(due)::text[]) AND planning_until IS NOT NULL
                """).map { try $0.get(0, String.self) })
            let complete = due.filter { !pending.contains($0) }
            if !pending.isEmpty {
                try await db.run("""
                    UPDATE webhook_checks SET check_at = \(now + recheckMillis)
                    WHERE notification_id = ANY(\(Array(pending))::text[])
                    """)
            }
            guard !complete.isEmpty else { return 0 }
            if !urls.isEmpty {
                var binds = PostgresBindings(capacity: 3)
                binds.append(complete)
                binds.append(urls)
                binds.append(now)
                try await db.run(PostgresQuery(unsafeSQL: """
                    INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
                    SELECT \(Self.eventIDSQL), e.url, 'notification.completed', 'notification:' || n.id,
                           json_build_object('notification_id', n.id, 'type', n.type, 'app_type', n.app_type,
                                             'entity_type', n.entity_type, 'entity_id', n.entity_id,
                                             'created_at', \(Self.iso("n.created_at")),
                                             'completed_at', \(Self.iso("$3::bigint")),
                                             'summary', (SELECT coalesce(json_object_agg(s.state, s.count), '{}'::json) FROM (
                                                 SELECT coalesce(r.state, d.state) AS state, count(*) AS count
                                                 FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                                                 WHERE d.notification_id = n.id GROUP BY 1) s))::text,
                           $3::bigint, $3::bigint
                    FROM notifications n CROSS JOIN unnest($2::text[]) AS e (url)
                    WHERE n.id = ANY($1::text[])
                    ON CONFLICT DO NOTHING
                    """, binds: binds))
            }
            try await db.run("DELETE FROM webhook_checks WHERE notification_id = ANY(\(complete)::text[])")
            return complete.count
        }
    }

    public func claimWebhookEvents(worker: String, limit: Int, leaseMillis: Int64,
                                   now: Int64) async throws(StoreError) -> [WebhookEvent] {
        guard limit > 0 else { return [] }
        let claimed = try await rows("claim webhook events", """
            UPDATE webhook_events SET lease_until = \(now + leaseMillis), claimed_by = \(worker)
            WHERE id IN (SELECT id FROM webhook_events
                         WHERE state = 'pending' AND available_at <= \(now)
                           AND (claimed_by IS NULL OR lease_until <= \(now))
                         ORDER BY available_at, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
            RETURNING id, event_id, endpoint, type, data, created_at, attempts
            """)
        return try decoded("claim webhook events") { try claimed.map(WebhookEvent.init(postgres:)).sorted { $0.id < $1.id } }
    }

    public func finishWebhookEvents(worker: String, _ ends: [WebhookAttemptEnd],
                                    now: Int64) async throws(StoreError) {
        guard !ends.isEmpty else { return }
        _ = try await rows("finish webhook events", """
            UPDATE webhook_events w
            SET state = e.state, attempts = w.attempts + 1, last_status = e.status, last_error = e.error,
                available_at = coalesce(e.available_at, w.available_at),
                finished_at = e.finished_at, lease_until = NULL, claimed_by = NULL
            FROM jsonb_to_recordset(\(WebhookAttemptEnd.rows(ends, now: now))::jsonb)
                 AS e (id bigint, state text, status integer, error text, available_at bigint, finished_at bigint)
            WHERE w.id = e.id AND w.claimed_by = \(worker) AND w.state = 'pending'
            """)
    }

    public func webhookEvents(state: String?, limit: Int, after: Int64?) async throws(StoreError) -> [WebhookEventView] {
        let found = try await rows("list webhook events", """
            SELECT id, event_id, endpoint, type, data, created_at, attempts, state, last_status, last_error,
                   finished_at, available_at
            FROM webhook_events WHERE (\(state)::text IS NULL OR state = \(state)::text) AND id > \(after ?? 0)
            ORDER BY id LIMIT \(Int64(limit))
            """)
        return try decoded("list webhook events") { try found.map(WebhookEventView.init(postgres:)) }
    }

    public func webhookEventCounts() async throws(StoreError) -> [String: Int] {
        var counts: [String: Int] = ["pending": 0, "failed": 0]
        for row in try await rows("count webhook events", """
            SELECT state, count(*) FROM webhook_events WHERE state IN ('pending', 'failed') GROUP BY state
            """) {
            counts[try decoded("count webhook events") { try row.get(0, String.self) }] =
                try decoded("count webhook events") { try row.get(1, Int.self) }
        }
        return counts
    }

    public func pruneWebhookEvents(finishedBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await rows("prune webhook events", """
            DELETE FROM webhook_events WHERE id IN (
                SELECT id FROM webhook_events WHERE state IN ('delivered', 'failed') AND finished_at < \(cutoff)
                LIMIT \(Int64(limit)))
            RETURNING id
            """).count
    }
}

extension WebhookEvent {
    init(postgres row: PostgresRandomAccessRow) throws {
        self.init(id: try row.get(0), eventID: try row.get(1), endpoint: try row.get(2), type: try row.get(3),
                  data: try row.get(4), createdAt: try row.get(5), attempts: try row.get(6, Int.self))
    }
}

extension WebhookEventView {
    init(postgres row: PostgresRandomAccessRow) throws {
        self.init(event: try WebhookEvent(postgres: row), state: try row.get(7),
                  lastStatus: try row.get(8, Int?.self), lastError: try row.get(9),
                  finishedAt: try row.get(10), availableAt: try row.get(11), cursor: try row.get(0))
    }
}

/// A decoding step of a method that throws only `StoreError`.
func decoded<T>(_ doing: String, _ body: () throws -> T) throws(StoreError) -> T {
    do { return try body() } catch { throw StoreError("\(doing): \(error)") }
}
