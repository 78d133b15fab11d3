import PostgresNIO

// Reading the delivery log: what happened to a notification, or to one apns-id.

extension PostgresStore {
    /// One snapshot (REPEATABLE READ): the header, the counts and the page agree.
    public func notification(id: String, limit: Int, after: Int64?) async throws(StoreError) -> NotificationView? {
        let doing = "read notification \(id)"
        guard limit > 0 else { throw StoreError("\(doing): a page holds at least one delivery (limit \(limit))") }
        return try await transaction(doing) { db -> NotificationView? in
            try await db.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            guard let row = try await db.rows("""
                SELECT id, type, entity_id, created_at, app_type FROM notifications WHERE id = \(id)
                """).first
            else { return nil }
            var counts: [String: Int] = [:]
            for r in try await db.rows("""
                SELECT coalesce(r.state, d.state), count(*) FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                WHERE d.notification_id = \(id) GROUP BY 1
                """) {
                counts[try r.get(0, String.self)] = try r.get(1, Int.self)
            }
            // One more than asked tells whether there is a next page (no limit: NULL).
            let take: Int64? = limit == Int.max ? nil : Int64(limit) + 1
            var ids: [Int64] = []
            var deliveries: [DeliveryView] = []
            for r in try await db.rows("""
                SELECT d.id, \(unescaped: DeliveryView.postgresColumns) FROM \(unescaped: DeliveryView.postgresTables)
                WHERE d.notification_id = \(id) AND d.id > \(after ?? 0) ORDER BY d.id LIMIT \(take)::bigint
                """) {
                ids.append(try r.get(0, Int64.self))
                deliveries.append(try DeliveryView(postgres: r, from: 1))
            }
            let page = Page(rows: deliveries, limit: limit) { ids[$0] }
            return NotificationView(id: try row.get(0), type: try row.get(1), entityID: try row.get(2),
                                    createdAt: try row.get(3), deliveries: page.items, counts: counts, next: page.next,
                                    appType: try row.get(4))
        }
    }

    public func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        let doing = "read delivery \(apnsID)"
        let found = try await rows(doing, """
            SELECT \(unescaped: DeliveryView.postgresColumns) FROM \(unescaped: DeliveryView.postgresTables)
            WHERE d.apns_id = \(apnsID)
            """)
        do {
            return try found.first.map { try DeliveryView(postgres: $0) }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }
}

extension DeliveryView {
    /// The same columns and tables as SQLite's (`DeliveryView.columns`), in the same
    /// order: a delivery is its log row with its answer from `results`, if any.
    static let postgresColumns = columns
    static let postgresTables = tables

    /// `postgresColumns` from column `first` on.
    init(postgres row: PostgresRandomAccessRow, from first: Int = 0) throws {
        let i = first
        self.init(notificationID: try row.get(i), userID: try row.get(i + 1), token: try row.get(i + 2),
                  environment: try row.get(i + 3), state: try row.get(i + 4), apnsID: try row.get(i + 5),
                  status: try row.get(i + 6), reason: try row.get(i + 7), timestamp: try row.get(i + 8),
                  attempts: try row.get(i + 9), finishedAt: try row.get(i + 10), notBefore: try row.get(i + 11),
                  carriedBy: try row.get(i + 13), batched: try row.get(i + 12), appType: try row.get(i + 14))
    }
}
