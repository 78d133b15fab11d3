import PostgresNIO

// A fan-out written in parts (see `FanOutPlans`), with PostgreSQL's statements.
// The deliveries of a planning notification are in no outbox row, so no instance's
// claim reaches them before the plan is complete. Several instances share the
// database: a plan is discarded only once its mark ran out, which its planner
// moves on with every part. Each step locks the notification's row first, so a
// discard and a part never interleave.

extension PostgresStore: FanOutPlans {
    public func recipients(appType: String, company: String, after: String?,
                           limit: Int) async throws(StoreError) -> [Recipient] {
        try await transaction("find recipients") { db -> [Recipient] in
            try await db.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            // Bytewise ("C"), as SQLite orders them: the page's cursor means the same.
            let users = try await db.rows("""
                SELECT DISTINCT user_id COLLATE "C" FROM devices
                WHERE company_id = \(company) AND app_type = \(appType) AND is_active
                  AND user_id COLLATE "C" > \(after ?? "")
                ORDER BY 1 LIMIT \(Int64(limit))
                """).map { try $0.get(0, String.self) }
            guard !users.isEmpty else { return [] }
            // Only the devices registered with the company, as a whole company's read.
            let devices = try await db.rows("""
                SELECT user_id, id, token, environment FROM devices
                WHERE company_id = \(company) AND app_type = \(appType) AND is_active AND platform = 'ios'
                  AND user_id = ANY(\(users))
                ORDER BY registered_at DESC, id DESC
                """)
            let preferences = try await db.rows("""
                SELECT user_id, key, value, text_value FROM preferences
                WHERE user_id = ANY(\(users)) AND app_type = \(appType)
                """)
            return try Self.recipients(users, devices, preferences)
        }
    }

    public func beginFanOut(_ notification: NewNotification, now: Int64,
                            planningUntil: Int64) async throws(StoreError) {
        _ = try await rows("enqueue notification \(notification.id)", """
            INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at, planning_until)
            VALUES (\(notification.id), \(notification.type), \(notification.entityType),
                    \(notification.entityID), \(notification.appType), \(now), \(planningUntil))
            """)
    }

    public func addFanOutPart(_ notification: NewNotification, _ deliveries: [NewDelivery],
                              payloads: [[UInt8]: Int64], now: Int64,
                              planningUntil: Int64) async throws(StoreError) -> [[UInt8]: Int64] {
        try await transaction("enqueue notification \(notification.id)") { db in
            try await Self.markPlanning(db, notification.id, until: planningUntil)
            let part = PartPayloads(deliveries, known: payloads)
            var ids: [Int64] = []
            if !part.new.isEmpty {
                // Ids from the sequence first, as an enqueue's (see `enqueue`).
                ids = try await db.rows("""
                    SELECT nextval('payloads_id_seq') FROM generate_series(1, \(part.new.count))
                    """).map { try $0.get(0, Int64.self) }
                try await db.run("""
                    INSERT INTO payloads (id, notification_id, bytes)
                    SELECT id, \(notification.id), bytes FROM unnest(\(ids)::bigint[], \(part.new.map { ByteBuffer(bytes: $0) })::bytea[]) AS p (id, bytes)
                    """)
            }
            try await Self.insertDeliveryRows(db, notificationID: notification.id, deliveries,
                                              payloadOf: part.rows(ids), now: now)
            return part.known(ids)
        }
    }

    public func completeFanOut(_ notification: NewNotification, held: [NewDelivery], payloads: [[UInt8]: Int64],
                               now: Int64) async throws(StoreError) {
        try await transaction("enqueue notification \(notification.id)") { db in
            try await Self.markPlanning(db, notification.id, until: nil)
            if !held.isEmpty {
                try await Self.applyHolds(db, notificationID: notification.id, held,
                                          payloadOf: held.map { payloads[$0.payload] ?? 0 }, now: now)
            }
            // Members of a window (batched) never go out themselves; carriers do.
            try await db.run("""
                INSERT INTO outbox (delivery_id, available_at)
                SELECT id, coalesce(not_before, \(now)) FROM deliveries
                WHERE notification_id = \(notification.id) AND state = 'pending'
                """)
            // Sent at commit, and only then: a woken worker finds the rows committed.
            try await db.run("SELECT pg_notify(\(Self.workChannel), '')")
        }
    }

    /// Moves a planning notification's mark to `until` (nil: the plan is complete),
    /// holding its row locked to the commit; throws when it is not planning.
    private static func markPlanning(_ db: PostgresConnection, _ id: String, until: Int64?) async throws {
        let marked = try await db.rows("""
            UPDATE notifications SET planning_until = \(until)
            WHERE id = \(id) AND planning_until IS NOT NULL
            RETURNING id
            """)
        guard !marked.isEmpty else { throw StoreError("enqueue notification \(id): its plan was discarded") }
    }

    public func leaseFanOutPage(notificationID: String, worker: String, after: Int64, limit: Int,
                                leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await transaction("lease deliveries of notification \(notificationID)") { db -> [ClaimedDelivery] in
            // Rows another transaction holds locked (a claim) are skipped, as a claim
            // skips them. Leased and read in one statement: one round trip a page.
            let found = try await db.rows("""
                WITH leased AS (
                    UPDATE outbox SET lease_until = \(now + leaseMillis), claimed_by = \(worker)
                    WHERE delivery_id IN (
                        SELECT o.delivery_id FROM deliveries d JOIN outbox o ON o.delivery_id = d.id
                        WHERE d.notification_id = \(notificationID) AND d.id > \(after)
                          AND o.claimed_by IS NULL AND o.available_at <= \(now)
                        ORDER BY d.id LIMIT \(Int64(limit))
                        FOR UPDATE OF o SKIP LOCKED)
                    RETURNING delivery_id
                )
                SELECT \(unescaped: Statements.claimedColumns.postgres)
                FROM leased l
                JOIN deliveries d ON d.id = l.delivery_id
                JOIN notifications n ON n.id = d.notification_id
                LEFT JOIN devices v ON v.id = d.device_id
                LEFT JOIN payloads p ON p.id = d.payload_id
                ORDER BY d.id
                """)
            return try Self.claimedDeliveries(found)
        }
    }

    public func discardPlan(notificationID: String, markBefore: Int64) async throws(StoreError) -> PlanDiscard {
        try await transaction("discard the plan of notification \(notificationID)") { db in
            try await Self.discardPlan(db, notificationID, markBefore: markBefore)
        }
    }

    public func discardPlans(before: Int64) async throws(StoreError) -> Int {
        let found = try await rows("discard unfinished plans", """
            SELECT id FROM notifications WHERE planning_until IS NOT NULL AND planning_until < \(before)
            """)
        let ids: [String]
        do {
            ids = try found.map { try $0.get(0, String.self) }
        } catch {
            throw StoreError(postgres: error, "discard unfinished plans", configuration)
        }
        var discarded = 0
        for id in ids {
            let gone = try await transaction("discard the plan of notification \(id)") { db in
                try await Self.discardPlan(db, id, markBefore: before)
            }
            if gone == .discarded { discarded += 1 }
        }
        return discarded
    }

    /// Locks the notification's row first: a planner's part waits, then finds its
    /// plan gone. The mark is read under that lock (its planner may have moved it
    /// on since a look-up).
    private static func discardPlan(_ db: PostgresConnection, _ id: String,
                                    markBefore: Int64) async throws -> PlanDiscard {
        let locked = try await db.rows("""
            SELECT planning_until FROM notifications WHERE id = \(id) FOR UPDATE
            """)
        guard let row = locked.first, let mark = try row.get(0, Int64?.self) else { return .noPlan }
        guard mark < markBefore || markBefore == .max else { return .stillPlanning }
        try await db.run("DELETE FROM delivery_events WHERE notification_id = \(id)")
        try await db.run("DELETE FROM deliveries WHERE notification_id = \(id)")
        try await db.run("DELETE FROM payloads WHERE notification_id = \(id)")
        try await db.run("DELETE FROM notifications WHERE id = \(id)")
        return .discarded
    }
}
