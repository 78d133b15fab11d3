import Foundation
import GRDB

// The outbox: deliveries waiting for a worker. A row is claimed by setting a lease
// (lease_until, claimed_by) and leaves the table when its delivery is final.
//
// "Held" means claimed_by is this worker. An expired lease is still held until
// another worker claims the row: a late finish from the first worker is then the
// truth (the notification was sent), and is recorded rather than sent again.

extension SQLiteStore {
    public func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery],
                        now: Int64) async throws(StoreError) {
        try await write("enqueue notification \(notification.id)") { db in
            try db.execute(sql: """
                INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at)
                VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [notification.id, notification.type, notification.entityType,
                                 notification.entityID, notification.appType, now])
            let delivery = try db.cachedStatement(sql: """
                INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id,
                                        payload, push_type, priority, collapse_id, expiration, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            let outbox = try db.cachedStatement(sql: "INSERT INTO outbox (delivery_id, available_at) VALUES (?, ?)")
            for d in deliveries {
                try delivery.execute(arguments: [notification.id, d.userID, d.deviceID, d.token, d.environment,
                                                 d.apnsID, Data(d.payload), d.pushType, d.priority, d.collapseID,
                                                 d.expiration, now])
                try outbox.execute(arguments: [db.lastInsertedRowID, now])
            }
        }
    }

    public func claim(worker: String, limit: Int, leaseMillis: Int64,
                      now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await write("claim") { db in
            // Select and lease in one IMMEDIATE transaction: no other writer, in this
            // process or another, can run between the two statements.
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.*, n.app_type
                FROM outbox o
                JOIN deliveries d ON d.id = o.delivery_id
                JOIN notifications n ON n.id = d.notification_id
                WHERE o.available_at <= :now AND (o.lease_until IS NULL OR o.lease_until <= :now)
                ORDER BY o.available_at, o.delivery_id
                LIMIT :limit
                """, arguments: ["now": now, "limit": limit])
            guard !rows.isEmpty else { return [] }
            let ids: [Int64] = rows.map { $0["id"] }
            try db.execute(sql: """
                UPDATE outbox SET lease_until = ?, claimed_by = ?
                WHERE delivery_id IN (SELECT value FROM json_each(?))
                """, arguments: [now + leaseMillis, worker, jsonArray(ids)])
            return rows.map(ClaimedDelivery.init(row:))
        }
    }

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
        return try await write("finish deliveries") { db in
            // Leaving the outbox is the proof of holding it: a second finish, or one
            // from a worker whose row another has claimed, deletes nothing.
            let leave = try db.cachedStatement(sql: "DELETE FROM outbox WHERE delivery_id = ? AND claimed_by = ?")
            let record = try db.cachedStatement(sql: """
                UPDATE deliveries SET state = ?, status = ?, reason = ?, apns_timestamp = ?, attempts = ?,
                                      finished_at = ?
                WHERE id = ? AND state = 'pending'
                RETURNING device_id
                """)
            var ignored = 0
            for outcome in outcomes {
                try leave.execute(arguments: [outcome.deliveryID, worker])
                guard db.changesCount == 1,
                      let deviceID = try Int64.fetchOne(record, arguments: [
                          outcome.delivered ? "delivered" : "failed", outcome.status, outcome.reason,
                          outcome.timestamp, outcome.attempts, now, outcome.deliveryID])
                else {
                    ignored += 1
                    continue
                }
                if outcome.delivered {
                    try db.execute(sql: "UPDATE devices SET last_used_at = ? WHERE id = ?", arguments: [now, deviceID])
                }
                if let change = outcome.tokenChange {
                    try Self.apply(change, to: deviceID, now: now, db)
                }
            }
            return ignored
        }
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

extension ClaimedDelivery {
    init(row: Row) {
        let payload: Data = row["payload"]
        self.init(
            id: row["id"], notificationID: row["notification_id"], appType: row["app_type"],
            delivery: NewDelivery(
                userID: row["user_id"], deviceID: row["device_id"], token: row["token"],
                environment: row["environment"], apnsID: row["apns_id"], payload: Array(payload),
                pushType: row["push_type"], priority: row["priority"], collapseID: row["collapse_id"],
                expiration: row["expiration"]),
            attempts: row["attempts"], crossEnvironmentTried: row["cross_environment_tried"])
    }
}
