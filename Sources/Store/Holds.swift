import GRDB

extension SQLiteStore {
    /// The enqueue's second step for deliveries with a hold, already inserted
    /// (pending) in this transaction: `HoldsPlan`'s steps, with SQLite's statements.
    /// Statements per delivery: batching and quiet hours touch a few users' devices
    /// per notification, never a 100k fan-out (which has no hold and never comes here).
    /// SQLite's single writer keeps the window found open until the commit.
    static func applyHolds(_ db: Database, notificationID: String, _ deliveries: [NewDelivery],
                           payloadOf: [Int64], now: Int64) throws {
        // Closed windows are of no more use (their deliveries live on in the outbox).
        try db.cachedStatement(sql: "DELETE FROM holds WHERE closes_at <= ?").execute(arguments: [now])
        let open = try db.cachedStatement(sql: """
            SELECT h.delivery_id FROM holds h JOIN outbox o ON o.delivery_id = h.delivery_id
            WHERE h.device_id = ? AND h.kind = ? AND h.key = ? AND h.closes_at > ? AND o.claimed_by IS NULL
            """)
        let idOf = try db.cachedStatement(sql: "SELECT id FROM deliveries WHERE apns_id = ?")
        let keep = try db.cachedStatement(sql: """
            INSERT OR REPLACE INTO holds (device_id, kind, key, delivery_id, closes_at) VALUES (?, ?, ?, ?, ?)
            """)
        let carry = try db.cachedStatement(sql: """
            UPDATE deliveries SET state = ?, carried_by = ?, finished_at = ?, not_before = NULL
            WHERE id = ? AND state = 'pending'
            """)
        for (i, d) in deliveries.enumerated() {
            guard let hold = d.hold else { continue }
            guard let id = try Int64.fetchOne(idOf, arguments: [d.apnsID]) else {
                throw StoreError("enqueue: delivery \(d.apnsID) vanished inside its own transaction")
            }
            let current = try Int64.fetchOne(open, arguments: [d.deviceID, hold.kindName, hold.key, now])
            var newCarrier: Int64 = 0
            for step in HoldsPlan.steps(for: d, id: id, hold: hold, open: current) {
                switch step {
                case .join(let carrier, let until):
                    try db.execute(sql: """
                        UPDATE deliveries SET payload_id = ?, push_type = ?, priority = ?, expiration = ?,
                                              batched = batched + 1, not_before = max(not_before, coalesce(?, not_before))
                        WHERE id = ?
                        """, arguments: [payloadOf[i], d.pushType, d.priority, d.expiration, until, carrier])
                    if let until {
                        try db.execute(sql: "UPDATE outbox SET available_at = max(available_at, ?) WHERE delivery_id = ?",
                                       arguments: [until, carrier])
                    }
                case .openCarrier(let apnsID, let collapseID, let notBefore):
                    try db.execute(sql: """
                        INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                                payload_id, push_type, priority, collapse_id, expiration, created_at,
                                                not_before, batched)
                        VALUES (?, ?, ?, ?, ?, ?, x'', ?, ?, ?, ?, ?, ?, ?, 1)
                        """, arguments: [notificationID, d.userID, d.deviceID, d.token, d.environment, apnsID,
                                         payloadOf[i], d.pushType, d.priority, collapseID, d.expiration, now, notBefore])
                    newCarrier = db.lastInsertedRowID
                case .keep(let delivery):
                    try keep.execute(arguments: [d.deviceID, hold.kindName, hold.key, delivery.row(newCarrier: newCarrier),
                                                 hold.closesAt])
                case .carry(let delivery, let by, let state):
                    try carry.execute(arguments: [state, by.row(newCarrier: newCarrier), now,
                                                  delivery.row(newCarrier: newCarrier)])
                case .leaveOutbox(let delivery):
                    try db.execute(sql: "DELETE FROM outbox WHERE delivery_id = ?", arguments: [delivery])
                }
            }
        }
    }
}
