import Foundation
import GRDB

// A fan-out written in parts (see `FanOutPlans`), with SQLite's statements. The
// deliveries of a planning notification are in no outbox row, so no claim reaches
// them before the plan is complete.

extension SQLiteStore: FanOutPlans {
    public func recipients(appType: String, company: String, after: String?,
                           limit: Int) async throws(StoreError) -> [Recipient] {
        try await read("find recipients") { db in
            // The page's users first (the company index holds them in order), then
            // their rows of the company, as `recipients` reads a whole company.
            let users = try String.fetchAll(db, sql: """
                SELECT DISTINCT user_id FROM devices
                WHERE company_id = ? AND app_type = ? AND is_active = 1 AND user_id > ?
                ORDER BY user_id LIMIT ?
                """, arguments: [company, appType, after ?? "", limit])
            guard let last = users.last else { return [] }
            var fold = RecipientsFold()
            let rows = try Row.fetchCursor(db, sql: """
                SELECT user_id, id, token, environment, platform = 'ios' FROM devices
                WHERE company_id = ? AND app_type = ? AND is_active = 1 AND user_id > ? AND user_id <= ?
                ORDER BY user_id, registered_at DESC, id DESC
                """, arguments: [company, appType, after ?? "", last])
            while let row = try rows.next() { try fold.companyDevice(row) }
            // A user with two devices gets their rows twice, which the fold absorbs.
            let preferenceRows = try Row.fetchCursor(db, sql: """
                SELECT p.user_id, p.key, p.value, p.text_value
                FROM devices v JOIN preferences p ON p.user_id = v.user_id AND p.app_type = v.app_type
                WHERE v.company_id = ? AND v.app_type = ? AND v.is_active = 1 AND v.user_id > ? AND v.user_id <= ?
                """, arguments: [company, appType, after ?? "", last])
            while let row = try preferenceRows.next() { try fold.preference(row) }
            return fold.result()
        }
    }

    public func beginFanOut(_ notification: NewNotification, now: Int64,
                            planningUntil: Int64) async throws(StoreError) {
        try await write("enqueue notification \(notification.id)") { db in
            try db.execute(sql: """
                INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at, planning_until)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [notification.id, notification.type, notification.entityType,
                                 notification.entityID, notification.appType, now, planningUntil])
        }
    }

    public func addFanOutPart(_ notification: NewNotification, _ deliveries: [NewDelivery],
                              payloads: [[UInt8]: Int64], now: Int64,
                              planningUntil: Int64) async throws(StoreError) -> [[UInt8]: Int64] {
        try await write("enqueue notification \(notification.id)") { db in
            try db.execute(sql: "UPDATE notifications SET planning_until = ? WHERE id = ? AND planning_until IS NOT NULL",
                           arguments: [planningUntil, notification.id])
            guard db.changesCount == 1 else {
                throw StoreError("enqueue notification \(notification.id): its plan was discarded")
            }
            let part = PartPayloads(deliveries, known: payloads)
            let ids = try Self.insertPayloads(db, notificationID: notification.id, part.new)
            try Self.insertDeliveryRows(db, notificationID: notification.id, deliveries,
                                        payloadOf: part.rows(ids), now: now)
            return part.known(ids)
        }
    }

    public func completeFanOut(_ notification: NewNotification, held: [NewDelivery], payloads: [[UInt8]: Int64],
                               now: Int64) async throws(StoreError) {
        try await write("enqueue notification \(notification.id)") { db in
            try db.execute(sql: "UPDATE notifications SET planning_until = NULL WHERE id = ? AND planning_until IS NOT NULL",
                           arguments: [notification.id])
            guard db.changesCount == 1 else {
                throw StoreError("enqueue notification \(notification.id): its plan was discarded")
            }
            if !held.isEmpty {
                try Self.applyHolds(db, notificationID: notification.id, held,
                                    payloadOf: held.map { payloads[$0.payload] ?? 0 }, now: now)
            }
            // Members of a window (batched) never go out themselves; carriers do.
            try db.execute(sql: """
                INSERT INTO outbox (delivery_id, available_at)
                SELECT id, coalesce(not_before, ?) FROM deliveries WHERE notification_id = ? AND state = 'pending'
                """, arguments: [now, notification.id])
        }
    }

    public func leaseFanOutPage(notificationID: String, worker: String, after: Int64, limit: Int,
                                leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await write("lease deliveries of notification \(notificationID)") { db in
            // The notification's rows (its index, in id order), not the outbox's
            // claim order: a page of this fan-out only, read as a claim reads it.
            var claimed: [ClaimedDelivery] = []
            claimed.reserveCapacity(limit)
            var mapping = ClaimMapping<Row>()
            let rows = try Row.fetchCursor(db.cachedStatement(sql: Self.leasePageSQL), arguments: [
                "notification": notificationID, "after": after, "now": now, "limit": limit])
            while let row = try rows.next() { claimed.append(try mapping.claimed(row)) }
            guard let first = claimed.first?.id, let last = claimed.last?.id else { return [] }
            // Under this write lock, the free due rows of the notification from the
            // page's first id to its last are exactly the page: leased by that id
            // range (the outbox's key), with no list of ids to pass and parse. Other
            // notifications' rows in the range (another enqueue between two parts)
            // are left alone. When the page's ids have no gap, the range can hold no
            // other row, and no row's notification needs a look.
            let gapless = last - first + 1 == Int64(claimed.count)
            var arguments: StatementArguments = [
                "until": now + leaseMillis, "worker": worker, "first": first, "last": last, "now": now]
            if !gapless { arguments += ["notification": notificationID] }
            try db.cachedStatement(sql: gapless ? Self.leaseGaplessRangeSQL : Self.leaseRangeSQL)
                .execute(arguments: arguments)
            return claimed
        }
    }

    /// A page of a fan-out's free due deliveries, as a claim reads them: :notification,
    /// :after (the last id of the page before), :now, :limit. CROSS JOIN keeps SQLite
    /// to this order: the notification's row once, then its index of deliveries (in
    /// id order), not a look-up of the notification by its text key for every row.
    static let leasePageSQL = """
        SELECT \(Statements.claimedColumns.sqlite)
        FROM notifications n
        CROSS JOIN deliveries d ON d.notification_id = n.id
        CROSS JOIN outbox o ON o.delivery_id = d.id
        LEFT JOIN devices v ON v.id = d.device_id
        LEFT JOIN payloads p ON p.id = d.payload_id
        WHERE n.id = :notification AND d.id > :after AND o.claimed_by IS NULL AND o.available_at <= :now
        ORDER BY d.id
        LIMIT :limit
        """

    /// The lease of a page read by `leasePageSQL` whose ids have no gap, so that every
    /// free due row in its range is one of it: :until, :worker, the page's :first and
    /// :last ids, :now. A walk of the outbox's key over the page's range.
    static let leaseGaplessRangeSQL = """
        UPDATE outbox SET lease_until = :until, claimed_by = :worker
        WHERE delivery_id BETWEEN :first AND :last AND claimed_by IS NULL AND available_at <= :now
        """

    /// The same for any page, and :notification: each row's notification is checked by
    /// the deliveries' key, so that another notification's rows in the range stay free.
    static let leaseRangeSQL = leaseGaplessRangeSQL + """
          AND (SELECT notification_id FROM deliveries WHERE id = outbox.delivery_id) = :notification
        """

    public func discardPlan(notificationID: String, markBefore: Int64) async throws(StoreError) -> PlanDiscard {
        try await write("discard the plan of notification \(notificationID)") { db in
            try Self.discardPlan(db, notificationID, markBefore: markBefore)
        }
    }

    public func discardPlans(before: Int64) async throws(StoreError) -> Int {
        try await write("discard unfinished plans") { db in
            let ids = try String.fetchAll(db, sql: """
                SELECT id FROM notifications WHERE planning_until IS NOT NULL AND planning_until < ?
                """, arguments: [before])
            for id in ids { _ = try Self.discardPlan(db, id, markBefore: before) }
            return ids.count
        }
    }

    /// A planning notification's deliveries are in no other table yet (no outbox
    /// row, result or hold): they go with their payloads and the notification.
    private static func discardPlan(_ db: Database, _ id: String, markBefore: Int64) throws -> PlanDiscard {
        guard let row = try Row.fetchOne(db, sql: "SELECT planning_until FROM notifications WHERE id = ?",
                                         arguments: [id]),
              let mark = row[0] as Int64? else { return .noPlan }
        guard mark < markBefore || markBefore == .max else { return .stillPlanning }
        try db.execute(sql: "DELETE FROM delivery_events WHERE notification_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM deliveries WHERE notification_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM payloads WHERE notification_id = ?", arguments: [id])
        try db.execute(sql: "DELETE FROM notifications WHERE id = ?", arguments: [id])
        return .discarded
    }
}
