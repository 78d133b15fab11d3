/// A fan-out written in parts (see `FanOutPlans`), once for both engines. The
/// deliveries of a planning notification are in no outbox row, so no claim (of any
/// instance) reaches them before the plan is complete. With several instances on
/// PostgreSQL a plan is discarded only once its mark ran out, which its planner moves
/// on with every part; each step locks the notification's row first, so a discard
/// and a part never interleave.
extension StoreEngine {
    public func recipients(appType: String, company: String, after: String?,
                           limit: Int) async throws(StoreError) -> [Recipient] {
        try await reading("find recipients") { c in
            // The page's users first (the company index holds them in order), then
            // their rows of the company, as `recipients` reads a whole company.
            let users = try await c.rows(PlanStatements.companyUsers, [company, appType, after ?? "", limit])
            guard let last = try users.last?.string(0) else { return [] }
            var fold = RecipientsFold()
            let page: [any StoreBindable] = [company, appType, after ?? "", last]
            try await c.forEachRow(PlanStatements.companyDevices, page) { try fold.companyDevice($0) }
            // A user with two devices gets their rows twice, which the fold absorbs.
            try await c.forEachRow(PlanStatements.companyPreferences, page) { try fold.preference($0) }
            return fold.result()
        }
    }

    public func beginFanOut(_ notification: NewNotification, now: Int64,
                            planningUntil: Int64) async throws(StoreError) {
        try await writing("enqueue notification \(notification.id)") { c in
            try await c.run(PlanStatements.begin, [notification.id, notification.type, notification.entityType,
                                                   notification.entityID, notification.appType, now, planningUntil])
        }
    }

    public func addFanOutPart(_ notification: NewNotification, _ deliveries: [NewDelivery],
                              payloads: [[UInt8]: Int64], now: Int64,
                              planningUntil: Int64) async throws(StoreError) -> [[UInt8]: Int64] {
        try await writing("enqueue notification \(notification.id)") { c in
            try await Self.markPlanning(c, notification.id, until: planningUntil)
            let part = PartPayloads(deliveries, known: payloads)
            let ids = try await c.insertPayloads(notificationID: notification.id, part.new)
            try await c.insertDeliveryRows(notificationID: notification.id, deliveries, payloadOf: part.rows(ids), now: now)
            return part.known(ids)
        }
    }

    public func completeFanOut(_ notification: NewNotification, held: [NewDelivery], payloads: [[UInt8]: Int64],
                               now: Int64) async throws(StoreError) {
        try await writing("enqueue notification \(notification.id)") { c in
            try await Self.markPlanning(c, notification.id, until: nil)
            if !held.isEmpty {
                try await Self.applyHolds(c, notificationID: notification.id, held,
                                          payloadOf: held.map { payloads[$0.payload] ?? 0 }, now: now)
            }
            // Members of a window (batched) never go out themselves; carriers do.
            try await c.run(PlanStatements.complete, [now, notification.id])
            try await c.wakeWorkers()
        }
    }

    /// Moves a planning notification's mark to `until` (nil: the plan is complete),
    /// holding its row locked to the commit; throws when it is not planning.
    private static func markPlanning(_ c: Connection, _ id: String, until: Int64?) async throws {
        guard try await c.row(PlanStatements.mark, [until, id]) != nil else {
            throw StoreError("enqueue notification \(id): its plan was discarded")
        }
    }

    public func leaseFanOutPage(notificationID: String, worker: String, after: Int64, limit: Int,
                                leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await writing("lease deliveries of notification \(notificationID)") { c in
            var mapping = ClaimMapping<Connection.Row>()
            switch c.engine {
            case .postgres:
                // Leased and read in one statement: one round trip a page.
                return try await c.mapRows(PlanStatements.leaseAndReadPage,
                                           [now + leaseMillis, worker, notificationID, after, now, limit]) {
                    try mapping.claimed($0)
                }
            case .sqlite:
                let claimed = try await c.mapRows(PlanStatements.readPage, [notificationID, after, now, limit]) {
                    try mapping.claimed($0)
                }
                guard let first = claimed.first?.id, let last = claimed.last?.id else { return [] }
                // Under this write lock, the free due rows of the notification from the
                // page's first id to its last are exactly the page: leased by that id
                // range (the outbox's key), with no list of ids to pass and parse. Other
                // notifications' rows in the range (another enqueue between two parts)
                // are left alone. When the page's ids have no gap, the range can hold no
                // other row, and no row's notification needs a look.
                if last - first + 1 == Int64(claimed.count) {
                    try await c.run(PlanStatements.leaseGaplessRange, [now + leaseMillis, worker, first, last, now])
                } else {
                    try await c.run(PlanStatements.leaseRange, [now + leaseMillis, worker, first, last, now, notificationID])
                }
                return claimed
            }
        }
    }

    public func discardPlan(notificationID: String, markBefore: Int64) async throws(StoreError) -> PlanDiscard {
        try await writing("discard the plan of notification \(notificationID)") { c in
            try await Self.discardPlan(c, notificationID, markBefore: markBefore)
        }
    }

    public func discardPlans(before: Int64) async throws(StoreError) -> Int {
        let ids = try await reading("discard unfinished plans") { c in
            try await c.rows(PlanStatements.expired, [before]).map { try $0.string(0) }
        }
        var discarded = 0
        for id in ids {
            let gone = try await writing("discard the plan of notification \(id)") { c in
                try await Self.discardPlan(c, id, markBefore: before)
            }
            if gone == .discarded { discarded += 1 }
        }
        return discarded
    }

    /// A planning notification's deliveries are in no other table yet (no outbox
    /// row, result or hold): they go with their payloads and the notification. The
    /// notification's row is locked first: a planner's part waits, then finds its
    /// plan gone. The mark is read under that lock (its planner may have moved it on
    /// since a look-up).
    private static func discardPlan(_ c: Connection, _ id: String, markBefore: Int64) async throws -> PlanDiscard {
        guard let row = try await c.row(PlanStatements.lockMark, [id]), let mark = try row.optionalInt64(0) else {
            return .noPlan
        }
        guard mark < markBefore || markBefore == .max else { return .stillPlanning }
        for statement in PlanStatements.discard { try await c.run(statement, [id]) }
        return .discarded
    }
}

enum PlanStatements {
    /// A page of a company's users with an active token of the app: 1 company, 2 app,
    /// 3 after (the last user of the page before; "" first), 4 how many. Bytewise
    /// order on both engines ("C" on PostgreSQL), so that the page's cursor means
    /// the same.
    static let companyUsers = Spelling(
        sqlite: """
            SELECT DISTINCT user_id FROM devices
            WHERE company_id = ?1 AND app_type = ?2 AND is_active = 1 AND user_id > ?3
            ORDER BY user_id LIMIT ?4
            """,
        postgres: """
            SELECT DISTINCT user_id COLLATE "C" FROM devices
            WHERE company_id = $1 AND app_type = $2 AND is_active AND user_id COLLATE "C" > $3
            ORDER BY 1 LIMIT $4
            """)

    /// Those users' active tokens of the company (any platform, for
    /// `RecipientsFold.companyDevice`), a user's side by side, newest first: 1 company,
    /// 2 app, 3 and 4 the page's users (after 3, up to 4).
    static let companyDevices = Spelling(
        sqlite: """
            SELECT user_id, id, token, environment, platform = 'ios' FROM devices
            WHERE company_id = ?1 AND app_type = ?2 AND is_active = 1 AND user_id > ?3 AND user_id <= ?4
            ORDER BY user_id, registered_at DESC, id DESC
            """,
        postgres: """
            SELECT user_id, id, token, environment, platform = 'ios' FROM devices
            WHERE company_id = $1 AND app_type = $2 AND is_active
              AND user_id COLLATE "C" > $3 AND user_id COLLATE "C" <= $4
            ORDER BY user_id COLLATE "C", registered_at DESC, id DESC
            """)

    /// Their saved preferences, arguments as `companyDevices`.
    static let companyPreferences = Spelling(
        sqlite: """
            SELECT p.user_id, p.key, p.value, p.text_value
            FROM devices v JOIN preferences p ON p.user_id = v.user_id AND p.app_type = v.app_type
            WHERE v.company_id = ?1 AND v.app_type = ?2 AND v.is_active = 1 AND v.user_id > ?3 AND v.user_id <= ?4
            """,
        postgres: """
            SELECT p.user_id, p.key, p.value, p.text_value
            FROM devices v JOIN preferences p ON p.user_id = v.user_id AND p.app_type = v.app_type
            WHERE v.company_id = $1 AND v.app_type = $2 AND v.is_active
              AND v.user_id COLLATE "C" > $3 AND v.user_id COLLATE "C" <= $4
            """)

    /// 1 id, 2 type, 3 entity type, 4 entity id, 5 app, 6 now, 7 the plan's mark.
    static let begin = Spelling("""
        INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at, planning_until)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        """)

    /// 1 the new mark (NULL: complete), 2 the notification; a row when it was planning.
    static let mark = Spelling("""
        UPDATE notifications SET planning_until = $1 WHERE id = $2 AND planning_until IS NOT NULL
        RETURNING id
        """)

    /// The plan's pending deliveries into the outbox: 1 now, 2 the notification.
    static let complete = Spelling("""
        INSERT INTO outbox (delivery_id, available_at)
        SELECT id, coalesce(not_before, $1) FROM deliveries WHERE notification_id = $2 AND state = 'pending'
        """)

    /// PostgreSQL: a page of a fan-out's free due deliveries, leased and read as a
    /// claim reads them, skipping rows another transaction holds locked (a claim):
    /// 1 the lease's end, 2 the worker, 3 the notification, 4 after (the last id of
    /// the page before), 5 now, 6 how many.
    static let leaseAndReadPage = Spelling.only(postgres: """
        WITH leased AS (
            UPDATE outbox SET lease_until = $1, claimed_by = $2
            WHERE delivery_id IN (
                SELECT o.delivery_id FROM deliveries d JOIN outbox o ON o.delivery_id = d.id
                WHERE d.notification_id = $3 AND d.id > $4 AND o.claimed_by IS NULL AND o.available_at <= $5
                ORDER BY d.id LIMIT $6
                FOR UPDATE OF o SKIP LOCKED)
            RETURNING delivery_id
        )
        SELECT \(Statements.claimedColumns.postgres)
        FROM leased l
        JOIN deliveries d ON d.id = l.delivery_id
        JOIN notifications n ON n.id = d.notification_id
        \(Statements.claimedDeviceAndPayload)
        ORDER BY d.id
        """)

    /// SQLite: the same page, read (leased by `leaseRange` under the same write lock):
    /// 1 the notification, 2 after, 3 now, 4 how many. CROSS JOIN keeps SQLite to this
    /// order: the notification's row once, then its index of deliveries (in id
    /// order), not a look-up of the notification by its text key for every row.
    static let readPage = Spelling.only(sqlite: """
        SELECT \(Statements.claimedColumns.sqlite)
        FROM notifications n
        CROSS JOIN deliveries d ON d.notification_id = n.id
        CROSS JOIN outbox o ON o.delivery_id = d.id
        \(Statements.claimedDeviceAndPayload)
        WHERE n.id = ?1 AND d.id > ?2 AND o.claimed_by IS NULL AND o.available_at <= ?3
        ORDER BY d.id
        LIMIT ?4
        """)

    /// SQLite: the lease of a page whose ids have no gap, so that every free due row
    /// in its range is one of it: 1 the lease's end, 2 the worker, 3 and 4 the page's
    /// first and last ids, 5 now. A walk of the outbox's key over the page's range.
    static let leaseGaplessRange = Spelling.only(sqlite: """
        UPDATE outbox SET lease_until = ?1, claimed_by = ?2
        WHERE delivery_id BETWEEN ?3 AND ?4 AND claimed_by IS NULL AND available_at <= ?5
        """)

    /// The same for any page, and 6 the notification: each row's notification is
    /// checked by the deliveries' key, so that another notification's rows in the
    /// range stay free.
    static let leaseRange = Spelling.only(sqlite: leaseGaplessRange.sqlite + """
          AND (SELECT notification_id FROM deliveries WHERE id = outbox.delivery_id) = ?6
        """)

    /// Plans whose mark ran out before 1.
    static let expired = Spelling("SELECT id FROM notifications WHERE planning_until IS NOT NULL AND planning_until < $1")

    /// 1 the notification's mark, its row locked on PostgreSQL.
    static let lockMark = Spelling(
        sqlite: "SELECT planning_until FROM notifications WHERE id = ?1",
        postgres: "SELECT planning_until FROM notifications WHERE id = $1 FOR UPDATE")

    /// A discarded plan's rows, 1 the notification, in this order.
    static let discard = [
        Spelling("DELETE FROM delivery_events WHERE notification_id = $1"),
        Spelling("DELETE FROM deliveries WHERE notification_id = $1"),
        Spelling("DELETE FROM payloads WHERE notification_id = $1"),
        Spelling("DELETE FROM notifications WHERE id = $1"),
    ]
}
