/// Webhook events' statements (`WebhookEvents.swift`), each engine's spelling side
/// by side where they differ: the events' JSON (`json_object` / `json_build_object`),
/// their ids and times, lists (`json_each` / arrays) and PostgreSQL's row locks.
enum WebhookEventsStatements {
    /// A new event id, random, per row.
    private static let sqliteEventID = "'evt_' || lower(hex(randomblob(12)))"
    private static let postgresEventID = "'evt_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24)"

    /// Milliseconds since 1970 (an integer expression) as the API's time text
    /// ("2026-11-22T21:28:00.123Z").
    private static func sqliteISO(_ millis: String) -> String {
        "strftime('%Y-%m-%dT%H:%M:%fZ', (\(millis)) / 1000.0, 'unixepoch')"
    }

    private static func postgresISO(_ millis: String) -> String {
        "(to_char(to_timestamp((\(millis)) / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS') || '.' "
            + "|| lpad(((\(millis)) % 1000)::text, 3, '0') || 'Z')"
    }

    /// `delivery.failed`, once per receiver, for each of the deliveries whose result
    /// is `failed`: 1 the delivery ids, 2 the receivers' URLs, 3 now.
    static let failedDeliveries = Spelling(
        sqlite: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(sqliteEventID), e.value, 'delivery.failed', 'delivery:' || d.id,
                   json_object('notification_id', d.notification_id, 'type', n.type, 'app_type', n.app_type,
                               'entity_type', n.entity_type, 'entity_id', n.entity_id, 'apns_id', d.apns_id,
                               'user_id', d.user_id, 'token', d.token, 'environment', d.environment,
                               'status', r.status, 'reason', r.reason, 'attempts', r.attempts,
                               'failed_at', \(sqliteISO("r.finished_at"))),
                   ?3, ?3
            FROM json_each(?1) i
            CROSS JOIN results r ON r.delivery_id = i.value
            CROSS JOIN deliveries d ON d.id = r.delivery_id
            CROSS JOIN notifications n ON n.id = d.notification_id
            CROSS JOIN json_each(?2) e
            WHERE r.state = 'failed'
            ON CONFLICT DO NOTHING
            """,
        postgres: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(postgresEventID), e.url, 'delivery.failed', 'delivery:' || d.id,
                   json_build_object('notification_id', d.notification_id, 'type', n.type, 'app_type', n.app_type,
                                     'entity_type', n.entity_type, 'entity_id', n.entity_id, 'apns_id', d.apns_id,
                                     'user_id', d.user_id, 'token', d.token, 'environment', d.environment,
                                     'status', r.status, 'reason', r.reason, 'attempts', r.attempts,
                                     'failed_at', \(postgresISO("r.finished_at")))::text,
                   $3::bigint, $3::bigint
            FROM results r
            JOIN deliveries d ON d.id = r.delivery_id
            JOIN notifications n ON n.id = d.notification_id
            CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE r.delivery_id = ANY($1::bigint[]) AND r.state = 'failed'
            ON CONFLICT DO NOTHING
            """)

    /// `token.deactivated`, once per receiver, if this transaction deactivated the
    /// device (its `deactivated_at` is now): 1 the device, 2 the receivers' URLs,
    /// 3 now, 4 APNs' time of the 410 (NULL: none).
    static let deactivation = Spelling(
        sqlite: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(sqliteEventID), e.value, 'token.deactivated', 'device:' || v.id || ':' || v.deactivated_at,
                   json_object('token', v.token, 'user_id', v.user_id, 'app_type', v.app_type,
                               'platform', v.platform, 'environment', v.environment, 'reason', v.deactivated_reason,
                               'apns_timestamp', \(sqliteISO("?4")), 'deactivated_at', \(sqliteISO("v.deactivated_at"))),
                   ?3, ?3
            FROM devices v CROSS JOIN json_each(?2) e
            WHERE v.id = ?1 AND v.is_active = 0 AND v.deactivated_at = ?3
            ON CONFLICT DO NOTHING
            """,
        postgres: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(postgresEventID), e.url, 'token.deactivated', 'device:' || v.id || ':' || v.deactivated_at,
                   json_build_object('token', v.token, 'user_id', v.user_id, 'app_type', v.app_type,
                                     'platform', v.platform, 'environment', v.environment,
                                     'reason', v.deactivated_reason, 'apns_timestamp', \(postgresISO("$4::bigint")),
                                     'deactivated_at', \(postgresISO("v.deactivated_at")))::text,
                   $3::bigint, $3::bigint
            FROM devices v CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE v.id = $1::bigint AND NOT v.is_active AND v.deactivated_at = $3::bigint
            ON CONFLICT DO NOTHING
            """)

    /// A check for `completeNotifications` on the notifications of these deliveries
    /// and of those they carried: 1 the delivery ids, 2 when it is due. PostgreSQL
    /// takes the check rows in one order, so that two finishes of one notification
    /// do not deadlock; SQLite's `WHERE true` tells its parser the upsert's ON is
    /// not a join's.
    static let completionChecks = Spelling(
        sqlite: """
            INSERT INTO webhook_checks (notification_id, check_at)
            SELECT notification_id, ?2 FROM (
                SELECT notification_id FROM deliveries WHERE id IN (SELECT value FROM json_each(?1))
                UNION
                SELECT notification_id FROM deliveries WHERE carried_by IN (SELECT value FROM json_each(?1))
            ) WHERE true
            ON CONFLICT (notification_id) DO UPDATE SET check_at = excluded.check_at
            """,
        postgres: """
            INSERT INTO webhook_checks (notification_id, check_at)
            SELECT notification_id, $2::bigint FROM (
                SELECT notification_id FROM deliveries WHERE id = ANY($1::bigint[])
                UNION
                SELECT notification_id FROM deliveries WHERE carried_by = ANY($1::bigint[])
            ) t ORDER BY notification_id
            ON CONFLICT (notification_id) DO UPDATE SET check_at = excluded.check_at
            """)

    /// `broadcast.completed`, once per receiver, for the broadcast if it is final:
    /// 1 the broadcast, 2 the receivers' URLs, 3 now.
    static let broadcast = Spelling(
        sqlite: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(sqliteEventID), e.value, 'broadcast.completed', 'broadcast:' || b.id,
                   json_object('broadcast_id', b.id, 'app_type', b.app_type, 'environment', b.environment,
                               'entity_type', b.entity_type, 'entity_id', b.entity_id, 'channel_id', b.channel_id,
                               'state', b.state, 'status', b.status, 'reason', b.reason, 'request_id', b.request_id,
                               'attempts', b.attempts, 'created_at', \(sqliteISO("b.created_at")),
                               'finished_at', \(sqliteISO("b.finished_at"))),
                   ?3, ?3
            FROM broadcasts b CROSS JOIN json_each(?2) e
            WHERE b.id = ?1 AND b.state <> 'pending'
            ON CONFLICT DO NOTHING
            """,
        postgres: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(postgresEventID), e.url, 'broadcast.completed', 'broadcast:' || b.id,
                   json_build_object('broadcast_id', b.id, 'app_type', b.app_type, 'environment', b.environment,
                                     'entity_type', b.entity_type, 'entity_id', b.entity_id, 'channel_id', b.channel_id,
                                     'state', b.state, 'status', b.status, 'reason', b.reason,
                                     'request_id', b.request_id, 'attempts', b.attempts,
                                     'created_at', \(postgresISO("b.created_at")),
                                     'finished_at', \(postgresISO("b.finished_at")))::text,
                   $3::bigint, $3::bigint
            FROM broadcasts b CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE b.id = $1::text AND b.state <> 'pending'
            ON CONFLICT DO NOTHING
            """)

    /// The checks due, oldest first: 1 now, 2 how many. PostgreSQL locks them, and
    /// another instance's pass skips them.
    static let dueChecks = Spelling(
        sqlite: "SELECT notification_id FROM webhook_checks WHERE check_at <= ?1 ORDER BY check_at LIMIT ?2",
        postgres: """
            SELECT notification_id FROM webhook_checks WHERE check_at <= $1
            ORDER BY check_at LIMIT $2 FOR UPDATE SKIP LOCKED
            """)

    /// Those of the notifications (1, their ids) with a delivery still in the outbox,
    /// or a plan not yet complete (its deliveries are not in the outbox yet: see
    /// `FanOutPlans`). SQLite looks from each one's newest delivery back (the oldest
    /// are sent first), so a large notification still sending is found pending at once.
    static let pendingNotifications = Spelling(
        sqlite: """
            SELECT i.value FROM json_each(?1) i
            WHERE EXISTS (SELECT 1 FROM deliveries d
                          WHERE d.notification_id = i.value
                            AND EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id)
                          ORDER BY d.id DESC)
               OR EXISTS (SELECT 1 FROM notifications WHERE id = i.value AND planning_until IS NOT NULL)
            """,
        postgres: """
            SELECT DISTINCT d.notification_id FROM deliveries d JOIN outbox o ON o.delivery_id = d.id
            WHERE d.notification_id = ANY($1::text[])
            UNION
            SELECT id FROM notifications WHERE id = ANY($1::text[]) AND planning_until IS NOT NULL
            """)

    /// Checks looked at again later: 1 when, 2 the notifications.
    static let recheck = Spelling(
        sqlite: "UPDATE webhook_checks SET check_at = ?1 WHERE notification_id IN (SELECT value FROM json_each(?2))",
        postgres: "UPDATE webhook_checks SET check_at = $1 WHERE notification_id = ANY($2::text[])")

    /// `notification.completed`, once per receiver, with the count of its deliveries
    /// by final state: 1 the notifications, 2 the receivers' URLs, 3 now.
    static let completed = Spelling(
        sqlite: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(sqliteEventID), e.value, 'notification.completed', 'notification:' || n.id,
                   json_object('notification_id', n.id, 'type', n.type, 'app_type', n.app_type,
                               'entity_type', n.entity_type, 'entity_id', n.entity_id,
                               'created_at', \(sqliteISO("n.created_at")), 'completed_at', \(sqliteISO("?3")),
                               'summary', json((SELECT json_group_object(state, count) FROM (
                                   SELECT coalesce(r.state, d.state) AS state, count(*) AS count
                                   FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                                   WHERE d.notification_id = n.id GROUP BY 1)))),
                   ?3, ?3
            FROM notifications n CROSS JOIN json_each(?2) e
            WHERE n.id IN (SELECT value FROM json_each(?1))
            ON CONFLICT DO NOTHING
            """,
        postgres: """
            INSERT INTO webhook_events (event_id, endpoint, type, subject, data, created_at, available_at)
            SELECT \(postgresEventID), e.url, 'notification.completed', 'notification:' || n.id,
                   json_build_object('notification_id', n.id, 'type', n.type, 'app_type', n.app_type,
                                     'entity_type', n.entity_type, 'entity_id', n.entity_id,
                                     'created_at', \(postgresISO("n.created_at")),
                                     'completed_at', \(postgresISO("$3::bigint")),
                                     'summary', (SELECT coalesce(json_object_agg(s.state, s.count), '{}'::json) FROM (
                                         SELECT coalesce(r.state, d.state) AS state, count(*) AS count
                                         FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                                         WHERE d.notification_id = n.id GROUP BY 1) s))::text,
                   $3::bigint, $3::bigint
            FROM notifications n CROSS JOIN unnest($2::text[]) AS e (url)
            WHERE n.id = ANY($1::text[])
            ON CONFLICT DO NOTHING
            """)

    /// The checks done with: 1 the notifications.
    static let deleteChecks = Spelling(
        sqlite: "DELETE FROM webhook_checks WHERE notification_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM webhook_checks WHERE notification_id = ANY($1::text[])")

    /// Due pending events whose lease is free or ran out, oldest first, leased to a
    /// worker: 1 the lease's end, 2 the worker, 3 now, 4 how many. PostgreSQL
    /// instances claiming at once take different rows (SKIP LOCKED).
    static let claim = Spelling(
        sqlite: """
            UPDATE webhook_events SET lease_until = ?1, claimed_by = ?2
            WHERE id IN (SELECT id FROM webhook_events
                         WHERE state = 'pending' AND available_at <= ?3 AND (claimed_by IS NULL OR lease_until <= ?3)
                         ORDER BY available_at, id LIMIT ?4)
            RETURNING \(WebhookEvent.columns)
            """,
        postgres: """
            UPDATE webhook_events SET lease_until = $1, claimed_by = $2
            WHERE id IN (SELECT id FROM webhook_events
                         WHERE state = 'pending' AND available_at <= $3
                           AND (claimed_by IS NULL OR lease_until <= $3)
                         ORDER BY available_at, id LIMIT $4 FOR UPDATE SKIP LOCKED)
            RETURNING \(WebhookEvent.columns)
            """)

    /// The attempts' ends, on the events this worker still holds: 1 the ends as
    /// `WebhookAttemptEnd.rows` writes them (one JSON array), 2 the worker.
    static let finish = Spelling(
        sqlite: """
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
            """,
        postgres: """
            UPDATE webhook_events w
            SET state = e.state, attempts = w.attempts + 1, last_status = e.status, last_error = e.error,
                available_at = coalesce(e.available_at, w.available_at),
                finished_at = e.finished_at, lease_until = NULL, claimed_by = NULL
            FROM jsonb_to_recordset($1::jsonb)
                 AS e (id bigint, state text, status integer, error text, available_at bigint, finished_at bigint)
            WHERE w.id = e.id AND w.claimed_by = $2 AND w.state = 'pending'
            """)

    /// A page of events in the order they were written: 1 the state (NULL: any),
    /// 2 after this id, 3 how many.
    static let page = Spelling(
        sqlite: """
            SELECT \(WebhookEventView.columns)
            FROM webhook_events WHERE (?1 IS NULL OR state = ?1) AND id > ?2 ORDER BY id LIMIT ?3
            """,
        postgres: """
            SELECT \(WebhookEventView.columns)
            FROM webhook_events WHERE ($1::text IS NULL OR state = $1::text) AND id > $2 ORDER BY id LIMIT $3
            """)

    /// Events not delivered, by state: the state, the count.
    static let counts = Spelling("""
        SELECT state, count(*) FROM webhook_events WHERE state IN ('pending', 'failed') GROUP BY state
        """)

    /// Up to 2 events finished before 1; one row each.
    static let prune = Spelling("""
        DELETE FROM webhook_events WHERE id IN (
            SELECT id FROM webhook_events WHERE state IN ('delivered', 'failed') AND finished_at < $1 LIMIT $2)
        RETURNING 1
        """)
}

extension WebhookEvent {
    /// In this order on both engines, read by `init(_:)`.
    static let columns = "id, event_id, endpoint, type, data, created_at, attempts"

    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.int64(0), eventID: try row.string(1), endpoint: try row.string(2),
                  type: try row.string(3), data: try row.string(4), createdAt: try row.int64(5),
                  attempts: try row.int(6))
    }
}

extension WebhookEventView {
    /// `WebhookEvent.columns`, then these; read by `init(_:)`.
    static let columns = WebhookEvent.columns + ", state, last_status, last_error, finished_at, available_at"

    init<R: StoreRow>(_ row: R) throws {
        self.init(event: try WebhookEvent(row), state: try row.string(7), lastStatus: try row.optionalInt(8),
                  lastError: try row.optionalString(9), finishedAt: try row.optionalInt64(10),
                  availableAt: try row.int64(11), cursor: try row.int64(0))
    }
}
