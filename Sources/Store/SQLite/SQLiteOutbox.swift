import Foundation
import GRDB

// The outbox: deliveries waiting for a worker. A row is claimed by setting a lease
// (lease_until, claimed_by) and leaves the table when its delivery is final.
//
// "Held" means claimed_by is this worker. An expired lease is still held until
// another worker claims the row: a late finish from the first worker is then the
// truth (the notification was sent), and is recorded rather than sent again.

extension SQLiteStore {
    public func unclaim(worker: String, deliveryIDs: [Int64]) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await write("unclaim deliveries") { db in
            try db.execute(sql: """
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL
                WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?))
                """, arguments: [worker, jsonArray(deliveryIDs)])
        }
    }

    /// Pending again from `availableAt`, the attempt counted, the apns-ids kept: for
    /// the rows this worker still holds only (as PostgreSQL's, one transaction).
    public func release(worker: String, deliveryIDs: [Int64], availableAt: Int64,
                        now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await write("release deliveries") { db in
            let ids = jsonArray(deliveryIDs)
            // Counted first, while `claimed_by` still proves this worker holds them.
            try db.execute(sql: """
                UPDATE deliveries SET attempts = attempts + 1
                WHERE id IN (SELECT delivery_id FROM outbox
                             WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?)))
                """, arguments: [worker, ids])
            try db.execute(sql: """
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL, available_at = ?
                WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?))
                """, arguments: [availableAt, worker, ids])
        }
    }

    public func claim(worker: String, limit: Int, leaseMillis: Int64,
                      now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await write("claim") { db in
            // Select and lease in one IMMEDIATE transaction: no other writer, in this
            // process or another, can run between the two statements.
            // Due rows are free ones (the partial index `outbox_free`, in claim order,
            // where held rows never are) and expired leases (`outbox_leased`: a dead
            // worker's, few); the oldest `limit` of both. Held rows (quiet hours, an open
            // window) wait further up `outbox_free`, at their not_before. The device's
            // state comes with each row. CROSS JOIN keeps SQLite reading the picked rows
            // first.
            let select = try db.cachedStatement(sql: Self.claimSQL)
            var claimed: [ClaimedDelivery] = []
            claimed.reserveCapacity(limit)
            var mapping = ClaimMapping<Row>()
            let rows = try Row.fetchCursor(select, arguments: ["now": now, "limit": limit])
            while let row = try rows.next() { claimed.append(try mapping.claimed(row)) }
            guard !claimed.isEmpty else { return [] }
            try db.cachedStatement(sql: """
                UPDATE outbox SET lease_until = ?, claimed_by = ?
                WHERE delivery_id IN (SELECT value FROM json_each(?))
                """).execute(arguments: [now + leaseMillis, worker, jsonArray(claimed.map(\.id))])
            return claimed
        }
    }

    /// The claim's read: $now, $limit (see `claim`).
    static let claimSQL = """
        WITH picked AS (
            SELECT * FROM (SELECT delivery_id, available_at FROM outbox
                           WHERE claimed_by IS NULL AND available_at <= :now
                           ORDER BY available_at, delivery_id LIMIT :limit)
            UNION ALL
            SELECT * FROM (SELECT delivery_id, available_at FROM outbox
                           WHERE claimed_by IS NOT NULL AND lease_until <= :now AND available_at <= :now
                           ORDER BY available_at, delivery_id LIMIT :limit)
        )
        SELECT \(Statements.claimedColumns.sqlite)
        FROM picked o
        CROSS JOIN deliveries d ON d.id = o.delivery_id
        CROSS JOIN notifications n ON n.id = d.notification_id
        LEFT JOIN devices v ON v.id = d.device_id
        LEFT JOIN payloads p ON p.id = d.payload_id
        ORDER BY o.available_at, o.delivery_id
        LIMIT :limit
        """

    public func renew(worker: String, deliveryIDs: [Int64], leaseMillis: Int64,
                      now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await write("renew leases") { db in
            try db.execute(sql: """
                UPDATE outbox SET lease_until = ?
                WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?))
                """, arguments: [now + leaseMillis, worker, jsonArray(deliveryIDs)])
        }
    }

    /// `attempts` is written as given: the outcome carries the delivery's total
    /// (the caller knows `ClaimedDelivery.attempts` and the engine's count).
    public func finish(worker: String, _ outcomes: [DeliveryOutcome],
                       now: Int64) async throws(StoreError) -> Int {
        guard !outcomes.isEmpty else { return 0 }
        let webhooks = webhookRouting.current
        return try await write("finish deliveries") { db in
            // Set-based: one DELETE of the batch from the outbox, one INSERT into
            // `results` per 256 outcomes, one UPDATE of the delivered devices;
            // statements per outcome only for the rare token changes.
            let (held, recorded) = try Self.leaveOutboxAndRecord(db, worker: worker, outcomes, now: now)
            let isRecorded: (Int64) -> Bool = recorded.map { set in { set.contains($0) } } ?? { _ in true }

            let effects = Finishes.deviceEffects(held, isRecorded: isRecorded)
            let used = effects.used
            if !used.isEmpty {
                try db.cachedStatement(sql: """
                    INSERT INTO device_use (device_id, last_used_at)
                    SELECT device_id, ?1 FROM deliveries WHERE id IN (SELECT value FROM json_each(?2))
                    ON CONFLICT (device_id) DO UPDATE SET last_used_at = excluded.last_used_at
                    """).execute(arguments: [now, jsonArray(used)])
            }
            let deviceOf = try db.cachedStatement(sql: "SELECT device_id FROM deliveries WHERE id = ?")
            for (deliveryID, change, timestamp) in effects.changes {
                guard let deviceID = try Int64.fetchOne(deviceOf, arguments: [deliveryID]) else { continue }
                try Self.apply(change, to: deviceID, now: now, db)
                if case .moveEnvironment = change { continue }
                try Self.recordDeactivation(db, webhooks, deviceID: deviceID, apnsTimestamp: timestamp, now: now)
            }
            let failedIDs = held.filter { !$0.delivered && isRecorded($0.deliveryID) }.map(\.deliveryID)
            try Self.recordFailedDeliveries(db, webhooks, ids: failedIDs, now: now)
            try Self.recordCompletionChecks(db, webhooks, ids: held.map(\.deliveryID).filter(isRecorded), now: now)
            return Finishes.ignored(outcomes, recorded: recorded?.count ?? held.count)
        }
    }

    /// A finish's first two steps (see `Finishes`): the batch's rows this worker
    /// holds leave the outbox (`held`: leaving it is the proof of holding), and each
    /// of those gets its result (`recorded`; nil: every one of `held`).
    ///
    /// Tried first without RETURNING, which SQLite carries out as a trigger program
    /// and a row per delivery: the usual batch is held whole (each outcome's row left
    /// the outbox) and recorded whole (a result is only written by the finish that
    /// took its delivery out of the outbox), and the counts of rows changed prove
    /// it. Otherwise (a duplicate in the batch, a lease another worker took over, a
    /// result already there) the same steps run again, under a savepoint rolled back
    /// to, with RETURNING naming the rows.
    private static func leaveOutboxAndRecord(_ db: Database, worker: String, _ outcomes: [DeliveryOutcome],
                                             now: Int64) throws -> (held: [DeliveryOutcome], recorded: Set<Int64>?) {
        let ids = jsonArray(outcomes.map(\.deliveryID))
        var whole = false
        try db.inSavepoint {
            try db.cachedStatement(sql: Statements.finishLeaveOutbox.sqlite).execute(arguments: [worker, ids])
            whole = try db.changesCount == outcomes.count
                && insertResults(db, outcomes, now: now, rows: nil) == outcomes.count
            return whole ? .commit : .rollback
        }
        if whole { return (outcomes, nil) }
        let held = Finishes.held(outcomes, left: try Int64.fetchSet(
            db.cachedStatement(sql: Statements.finishLeaveOutboxReturning.sqlite), arguments: [worker, ids]))
        var recorded = Set<Int64>(minimumCapacity: held.count)
        try insertResults(db, held, now: now, rows: { id, _ in recorded.insert(id) })
        return (held, recorded)
    }

    /// One result per outcome, none over one already there; with `rows`, RETURNING
    /// gives the ids written. Returns how many were written.
    @discardableResult
    private static func insertResults(_ db: Database, _ outcomes: [DeliveryOutcome], now: Int64,
                                      rows: ((Int64, Int64) -> Void)?) throws -> Int {
        let finishedAt = now.databaseValue
        let returning = rows == nil ? "" : "RETURNING delivery_id, delivery_id"
        return try db.executeChunked(count: outcomes.count, maxRows: 256, sql: { count in
            """
            INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
            VALUES \(placeholders(rows: count, columns: 7))
            ON CONFLICT (delivery_id) DO NOTHING \(returning)
            """
        }, bind: { i, values in
            let o = outcomes[i]
            values.append(o.deliveryID.databaseValue)
            values.append(Finishes.state(o).databaseValue)
            values.append(o.status.databaseValue)
            values.append(o.reason.databaseValue)
            values.append(o.timestamp.databaseValue)
            values.append(o.attempts.databaseValue)
            values.append(finishedAt)
        }, rows: rows)
    }

    /// Counts the ended claim in `attempts` (see `ClaimedDelivery.attempts`); a retry
    /// from a worker that no longer holds the delivery is ignored.
    public func retry(worker: String, deliveryID: Int64, environment: String, now: Int64) async throws(StoreError) {
        try await write("retry delivery \(deliveryID)") { db in
            // Back in line at its old place (available_at is kept), free for any worker.
            try db.execute(sql: """
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL WHERE delivery_id = ? AND claimed_by = ?
                """, arguments: [deliveryID, worker])
            guard db.changesCount == 1 else { return }
            try db.execute(sql: """
                UPDATE deliveries SET environment = ?, cross_environment_tried = 1, attempts = attempts + 1
                WHERE id = ?
                """, arguments: [environment, deliveryID])
        }
    }

    public func outboxDepth() async throws(StoreError) -> Int {
        try await read("count the outbox") { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox") ?? 0 }
    }

    public func outboxWaiting(now: Int64) async throws(StoreError) -> Int {
        try await read("count the outbox") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE available_at > ?", arguments: [now]) ?? 0
        }
    }

    public func outboxOldestDue(now: Int64) async throws(StoreError) -> Int64? {
        // The first row of the (available_at, delivery_id) index: no scan.
        try await read("read the outbox's oldest due delivery") { db in
            try Int64.fetchOne(db, sql: "SELECT min(available_at) FROM outbox WHERE available_at <= ?", arguments: [now])
        }
    }

    /// What an answer from APNs says about the token (the service decided which).
    private static func apply(_ change: DeliveryOutcome.TokenChange, to deviceID: Int64, now: Int64, _ db: Database) throws {
        switch change {
        case .deactivate(let reason, let registeredBefore):
            // A token registered again after APNs saw it die belongs to a reinstall: keep it.
            try db.execute(sql: """
                UPDATE devices SET is_active = 0, deactivated_reason = ?, deactivated_at = ?, updated_at = ?
                WHERE id = ? AND is_active = 1 AND registered_at < ?
                """, arguments: [reason, now, now, deviceID, registeredBefore])
        case .deactivateNow(let reason):
            try db.execute(sql: """
                UPDATE devices SET is_active = 0, deactivated_reason = ?, deactivated_at = ?, updated_at = ?
                WHERE id = ? AND is_active = 1
                """, arguments: [reason, now, now, deviceID])
        case .moveEnvironment(let environment):
            try db.execute(sql: "UPDATE devices SET environment = ?, updated_at = ? WHERE id = ?",
                           arguments: [environment, now, deviceID])
        }
    }
}
