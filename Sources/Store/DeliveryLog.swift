import GRDB

// Reading the delivery log: what happened to a notification, or to one apns-id.

extension SQLiteStore {
    public func notification(id: String, limit: Int, after: Int64?) async throws(StoreError) -> NotificationView? {
        try await read("read notification \(id)") { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT id, type, entity_id, created_at, app_type FROM notifications WHERE id = ?",
                                             arguments: [id])
            else { return nil }
            var counts: [String: Int] = [:]
            for r in try Row.fetchAll(db, sql: """
                SELECT coalesce(r.state, d.state) AS state, count(*) AS n
                FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                WHERE d.notification_id = ? GROUP BY 1
                """, arguments: [id]) {
                counts[r["state"]] = r["n"]
            }
            // One more than asked tells whether there is a next page.
            let take = limit == Int.max ? -1 : limit + 1
            var ids: [Int64] = []
            var deliveries: [DeliveryView] = []
            let rows = try Row.fetchCursor(db, sql: """
                SELECT d.id AS log_id, \(DeliveryView.columns) FROM \(DeliveryView.tables)
                WHERE d.notification_id = ? AND d.id > ? ORDER BY d.id LIMIT ?
                """, arguments: [id, after ?? 0, take])
            while let r = try rows.next() {
                ids.append(r["log_id"])
                deliveries.append(DeliveryView(row: r))
            }
            let page = Page(rows: deliveries, limit: limit) { ids[$0] }
            return NotificationView(id: row["id"], type: row["type"], entityID: row["entity_id"],
                                    createdAt: row["created_at"], deliveries: page.items, counts: counts, next: page.next,
                                    appType: row["app_type"])
        }
    }

    public func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        try await read("read delivery \(apnsID)") { db in
            try Row.fetchOne(db, sql: "SELECT \(DeliveryView.columns) FROM \(DeliveryView.tables) WHERE d.apns_id = ?",
                             arguments: [apnsID]).map(DeliveryView.init(row:))
        }
    }
}

extension DeliveryView {
    /// Everything but the payload, which the log does not show. A delivery's answer
    /// is its `results` row when it has one (see `Schema`).
    static let columns = """
        d.notification_id, d.user_id, d.token, d.environment, coalesce(r.state, d.state) AS state, d.apns_id,
        coalesce(r.status, d.status) AS status, coalesce(r.reason, d.reason) AS reason,
        coalesce(r.apns_timestamp, d.apns_timestamp) AS apns_timestamp, coalesce(r.attempts, d.attempts) AS attempts,
        coalesce(r.finished_at, d.finished_at) AS finished_at, d.not_before, d.batched, c.apns_id AS carried_by,
        n.app_type
        """
    /// A member names its carrier by apns-id (the one the backend knows).
    static let tables = """
        deliveries d JOIN notifications n ON n.id = d.notification_id
        LEFT JOIN results r ON r.delivery_id = d.id LEFT JOIN deliveries c ON c.id = d.carried_by
        """

    init(row: Row) {
        self.init(notificationID: row["notification_id"], userID: row["user_id"], token: row["token"],
                  environment: row["environment"], state: row["state"], apnsID: row["apns_id"],
                  status: row["status"], reason: row["reason"], timestamp: row["apns_timestamp"],
                  attempts: row["attempts"], finishedAt: row["finished_at"], notBefore: row["not_before"],
                  carriedBy: row["carried_by"], batched: row["batched"], appType: row["app_type"])
    }
}
