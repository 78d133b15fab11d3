/// A notification and its deliveries going into the log and the outbox in one
/// transaction (`OutboxStore.enqueue`), once for both engines.
extension StoreEngine {
    public func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery], now: Int64,
                        lease: OutboxLease?) async throws(StoreError) -> [ClaimedDelivery] {
        try await writing("enqueue notification \(notification.id)") { c in
            try await c.run(EnqueueStatements.insertNotification, [
                notification.id, notification.type, notification.entityType, notification.entityID,
                notification.appType, now])
            guard !deliveries.isEmpty else { return [] }
            let mine = try await Self.thisEnqueuesRows(c, notification)
            let distinct = DistinctPayloads(deliveries)
            let payloadOf = distinct.rows(try await c.insertPayloads(notificationID: notification.id, distinct.payloads))
            try await c.insertDeliveryRows(notificationID: notification.id, deliveries, payloadOf: payloadOf, now: now)

            var claimed: [ClaimedDelivery] = []
            if !deliveries.allSatisfy(\.isDueNow) {
                try await Self.applyHolds(c, notificationID: notification.id, deliveries, payloadOf: payloadOf, now: now)
                // Members of a window (batched) never go out themselves; carriers do.
                try await c.run(EnqueueStatements.outboxPending, [now, mine])
            } else if let lease {
                // The common case, every delivery due now, sent by the enqueuing process.
                try await c.run(EnqueueStatements.outboxLeased, [now, now + lease.millis, lease.worker, mine])
                // What the claim would say of each, read in this transaction: the
                // recipients were read before it, and a device may have changed since.
                let rows = try await c.mapRows(EnqueueStatements.enqueuedFacts, [notification.appType, mine]) {
                    (id: try $0.int64(0), apnsID: try $0.string(1), active: try $0.bool(2))
                }
                claimed = ClaimedDelivery.enqueued(notification, deliveries, rows: rows)
            } else {
                try await c.run(EnqueueStatements.outboxDue, [now, mine])
            }
            // Idle workers elsewhere learn of rows no one holds (at commit).
            if claimed.isEmpty { try await c.wakeWorkers() }
            return claimed
        }
    }

    /// How this transaction's deliveries are found again, as the engine's statements
    /// take it: on SQLite the id before the first of them (a new row gets the largest
    /// id plus one and nobody else writes meanwhile, so they are a walk of the table's
    /// end); on PostgreSQL, where other instances insert at the same time, the
    /// notification.
    private static func thisEnqueuesRows(_ c: Connection, _ notification: NewNotification) async throws
        -> any StoreBindable {
        switch c.engine {
        case .sqlite: try await c.int64(EnqueueStatements.lastDeliveryID, []) ?? 0
        case .postgres: notification.id
        }
    }
}

/// The enqueue's statements. "This enqueue's rows" is `EnqueueStatements.mine`'s
/// argument: the last id before them on SQLite, the notification on PostgreSQL.
enum EnqueueStatements {
    /// 1 id, 2 type, 3 entity type, 4 entity id, 5 app, 6 now.
    static let insertNotification = Spelling("""
        INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at)
        VALUES ($1, $2, $3, $4, $5, $6)
        """)

    static let lastDeliveryID = Spelling("SELECT coalesce(max(id), 0) FROM deliveries")

    /// This enqueue's deliveries, when the last argument is this enqueue's rows.
    private static func mine(_ sqlite: String, _ postgres: String, last: Int) -> Spelling {
        Spelling(sqlite: sqlite + " d.id > ?\(last)", postgres: postgres + " d.notification_id = $\(last)")
    }

    /// Pending ones into the outbox, at their own time: 1 now, 2 this enqueue's rows.
    static let outboxPending = mine("""
        INSERT INTO outbox (delivery_id, available_at)
        SELECT d.id, coalesce(d.not_before, ?1) FROM deliveries d WHERE d.state = 'pending' AND
        """, """
        INSERT INTO outbox (delivery_id, available_at)
        SELECT d.id, coalesce(d.not_before, $1) FROM deliveries d WHERE d.state = 'pending' AND
        """, last: 2)

    /// All of them, due now: 1 now, 2 this enqueue's rows.
    static let outboxDue = mine("""
        INSERT INTO outbox (delivery_id, available_at) SELECT d.id, ?1 FROM deliveries d WHERE
        """, """
        INSERT INTO outbox (delivery_id, available_at) SELECT d.id, $1 FROM deliveries d WHERE
        """, last: 2)

    /// All of them, leased: 1 now, 2 the lease's end, 3 the worker, 4 this enqueue's rows.
    static let outboxLeased = mine("""
        INSERT INTO outbox (delivery_id, available_at, lease_until, claimed_by)
        SELECT d.id, ?1, ?2, ?3 FROM deliveries d WHERE
        """, """
        INSERT INTO outbox (delivery_id, available_at, lease_until, claimed_by)
        SELECT d.id, $1, $2, $3 FROM deliveries d WHERE
        """, last: 4)

    /// Each one's id, apns-id and whether its device is still an active token of its
    /// user, app and kind (as `Statements.claimedColumns` says it), in id order:
    /// 1 the app, 2 this enqueue's rows.
    static let enqueuedFacts: Spelling = {
        let facts = mine("""
            SELECT d.id, d.apns_id,
                   coalesce(v.is_active = 1 AND v.user_id = d.user_id AND v.app_type = ?1
                            AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                            0)
            FROM deliveries d LEFT JOIN devices v ON v.id = d.device_id WHERE
            """, """
            SELECT d.id, d.apns_id,
                   coalesce(v.is_active AND v.user_id = d.user_id AND v.app_type = $1
                            AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                            false)
            FROM deliveries d LEFT JOIN devices v ON v.id = d.device_id WHERE
            """, last: 2)
        return Spelling(sqlite: facts.sqlite + " ORDER BY d.id", postgres: facts.postgres + " ORDER BY d.id")
    }()
}
