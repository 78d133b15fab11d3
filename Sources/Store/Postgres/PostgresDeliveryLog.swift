import PostgresNIO

// Reading the delivery log: what happened to a notification, or to one apns-id.

extension PostgresStore {
    public func notification(id: String) async throws(StoreError) -> NotificationView? {
        let doing = "read notification \(id)"
        // One snapshot: the header and its deliveries as of one moment.
        return try await transaction(doing) { db -> NotificationView? in
            try await db.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            guard let row = try await db.rows("""
                SELECT id, type, entity_id, created_at FROM notifications WHERE id = \(id)
                """).first
            else { return nil }
            let deliveries = try await db.rows("""
                SELECT \(unescaped: DeliveryView.postgresColumns) FROM deliveries WHERE notification_id = \(id) ORDER BY id
                """).map(DeliveryView.init(postgres:))
            return NotificationView(id: try row.get(0), type: try row.get(1), entityID: try row.get(2),
                                    createdAt: try row.get(3), deliveries: deliveries)
        }
    }

    public func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        let doing = "read delivery \(apnsID)"
        let found = try await rows(doing, """
            SELECT \(unescaped: DeliveryView.postgresColumns) FROM deliveries WHERE apns_id = \(apnsID)
            """)
        do {
            return try found.first.map(DeliveryView.init(postgres:))
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }
}

extension DeliveryView {
    /// Everything but the payload, which the log does not show.
    static let postgresColumns = """
        notification_id, user_id, token, environment, state, apns_id, status, reason, apns_timestamp,
        attempts, finished_at
        """

    init(postgres row: PostgresRandomAccessRow) throws {
        self.init(notificationID: try row.get(0), userID: try row.get(1), token: try row.get(2),
                  environment: try row.get(3), state: try row.get(4), apnsID: try row.get(5),
                  status: try row.get(6), reason: try row.get(7), timestamp: try row.get(8),
                  attempts: try row.get(9), finishedAt: try row.get(10))
    }
}
