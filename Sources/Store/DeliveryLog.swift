/// `DeliveryLogStore`, once for both engines: what happened to a notification, or to
/// one apns-id.
extension StoreEngine {
    /// One snapshot: the header, the counts and the page agree.
    public func notification(id: String, limit: Int, after: Int64?) async throws(StoreError) -> NotificationView? {
        let doing = "read notification \(id)"
        // A page of none would have no last item to name the next page by.
        guard limit > 0 else { throw StoreError("\(doing): a page holds at least one delivery (limit \(limit))") }
        return try await reading(doing) { c -> NotificationView? in
            guard let row = try await c.row(DeliveryLogStatements.notification, [id]) else { return nil }
            var counts: [String: Int] = [:]
            for r in try await c.rows(DeliveryLogStatements.counts, [id]) {
                counts[try r.string(0)] = try r.int(1)
            }
            // One more than asked tells whether there is a next page.
            let take = limit == Int.max ? Int64.max : Int64(limit) + 1
            var ids: [Int64] = []
            var deliveries: [DeliveryView] = []
            for r in try await c.rows(DeliveryLogStatements.page, [id, after ?? 0, take]) {
                ids.append(try r.int64(0))
                deliveries.append(try DeliveryView(r, from: 1))
            }
            let page = Page(rows: deliveries, limit: limit) { ids[$0] }
            return NotificationView(id: try row.string(0), type: try row.string(1), entityID: try row.optionalString(2),
                                    createdAt: try row.int64(3), deliveries: page.items, counts: counts,
                                    next: page.next, appType: try row.string(4))
        }
    }

    public func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        try await reading("read delivery \(apnsID)") { c in
            try await c.row(DeliveryLogStatements.byAPNsID, [apnsID]).map { try DeliveryView($0) }
        }
    }
}

enum DeliveryLogStatements {
    /// Notification 1's header: id, type, entity, creation, app.
    static let notification = Spelling("""
        SELECT id, type, entity_id, created_at, app_type FROM notifications WHERE id = $1
        """)

    /// How many of notification 1's deliveries are in each state.
    static let counts = Spelling("""
        SELECT coalesce(r.state, d.state), count(*) FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
        WHERE d.notification_id = $1 GROUP BY 1
        """)

    /// Notification 1's deliveries after id 2 in log order, at most 3: the id, then
    /// `DeliveryView.columns`.
    static let page = Spelling("""
        SELECT d.id, \(DeliveryView.columns) FROM \(DeliveryView.tables)
        WHERE d.notification_id = $1 AND d.id > $2 ORDER BY d.id LIMIT $3
        """)

    /// The delivery of apns-id 1.
    static let byAPNsID = Spelling("""
        SELECT \(DeliveryView.columns) FROM \(DeliveryView.tables) WHERE d.apns_id = $1
        """)
}

extension DeliveryView {
    /// Everything but the payload, which the log does not show, in this order on both
    /// engines (read by `init(_:from:)`). A delivery's answer is its `results` row
    /// when it has one (see `Schema`).
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

    /// `columns`, from column `first` on.
    init<R: StoreRow>(_ row: R, from first: Int = 0) throws {
        let i = first
        self.init(notificationID: try row.string(i), userID: try row.string(i + 1), token: try row.string(i + 2),
                  environment: try row.string(i + 3), state: try row.string(i + 4), apnsID: try row.string(i + 5),
                  status: try row.optionalInt(i + 6), reason: try row.optionalString(i + 7),
                  timestamp: try row.optionalInt64(i + 8), attempts: try row.int(i + 9),
                  finishedAt: try row.optionalInt64(i + 10), notBefore: try row.optionalInt64(i + 11),
                  carriedBy: try row.optionalString(i + 13), batched: try row.optionalInt(i + 12),
                  appType: try row.string(i + 14))
    }
}
