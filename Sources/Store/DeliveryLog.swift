import GRDB

// Reading the delivery log: what happened to a notification, or to one apns-id.

extension SQLiteStore {
    public func notification(id: String) async throws(StoreError) -> NotificationView? {
        try await read("read notification \(id)") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT id, type, entity_id, created_at FROM notifications WHERE id = ?",
                                             arguments: [id])
            else { return nil }
            let deliveries = try Row.fetchAll(db, sql: "SELECT \(DeliveryView.columns) FROM deliveries WHERE notification_id = ? ORDER BY id",
                                              arguments: [id]).map(DeliveryView.init(row:))
            return NotificationView(id: row["id"], type: row["type"], entityID: row["entity_id"],
                                    createdAt: row["created_at"], deliveries: deliveries)
        }
    }

    public func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        try await read("read delivery \(apnsID)") { db in
            try Row.fetchOne(db, sql: "SELECT \(DeliveryView.columns) FROM deliveries WHERE apns_id = ?",
                             arguments: [apnsID]).map(DeliveryView.init(row:))
        }
    }
}

extension DeliveryView {
    /// Everything but the payload, which the log does not show.
    static let columns = """
        notification_id, user_id, token, environment, state, apns_id, status, reason, apns_timestamp,
        attempts, finished_at
        """

    init(row: Row) {
        self.init(notificationID: row["notification_id"], userID: row["user_id"], token: row["token"],
                  environment: row["environment"], state: row["state"], apnsID: row["apns_id"],
                  status: row["status"], reason: row["reason"], timestamp: row["apns_timestamp"],
                  attempts: row["attempts"], finishedAt: row["finished_at"])
    }
}
