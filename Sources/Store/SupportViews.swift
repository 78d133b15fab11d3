/// What support looks up (`SupportViewStore`), once for both engines: every list
/// newest first, a page at a time, each page one more row than asked to tell whether
/// another follows. Ids are ordered byte-wise on both engines (COLLATE "C" on
/// PostgreSQL, as SQLite orders them).
extension StoreEngine {
    public func userDevices(userID: String) async throws(StoreError) -> [UserDevice] {
        try await reading("list a user's devices") { c in
            try await c.rows(SupportStatements.userDevices, [userID]).map(UserDevice.init)
        }
    }

    public func userDeliveries(userID: String, limit: Int,
                               before: Int64?) async throws(StoreError) -> Page<DeliveryView, Int64> {
        try await reading("list a user's deliveries") { c in
            var ids: [Int64] = []
            var items: [DeliveryView] = []
            for r in try await c.rows(SupportStatements.userDeliveries, [userID, before ?? Int64.max, limit + 1]) {
                ids.append(try r.int64(0))
                items.append(try DeliveryView(r, from: 1))
            }
            return Page(rows: items, limit: limit) { ids[$0] }
        }
    }

    /// One snapshot: the page and its counts agree.
    public func recentNotifications(limit: Int,
                                    before: TimeCursor?) async throws(StoreError) -> Page<NotificationSummary, TimeCursor> {
        try await reading("list recent notifications") { c in
            let cursor = before ?? TimeCursor(millis: Int64.max, id: "")
            let rows = try await c.rows(SupportStatements.recentNotifications, [cursor.millis, cursor.id, limit + 1])
                .map(NotificationSummary.init)
            var page = Page(rows: rows, limit: limit) { TimeCursor(millis: rows[$0].createdAt, id: rows[$0].id) }
            var counts: [String: [String: Int]] = [:]
            for r in try await c.rows(SupportStatements.deliveryCounts, [StoreValue.list(page.items.map(\.id))]) {
                counts[try r.string(0), default: [:]][try r.string(1)] = try r.int(2)
            }
            for i in page.items.indices { page.items[i].counts = counts[page.items[i].id] ?? [:] }
            return page
        }
    }

    public func deactivatedDevices(since: Int64, limit: Int,
                                   before: TimeCursor?) async throws(StoreError) -> Page<UserDevice, TimeCursor> {
        try await reading("list deactivated devices") { c in
            let cursorID = before.flatMap { Int64($0.id) } ?? Int64.max
            let cursorTime = before?.millis ?? Int64.max
            let items = try await c.rows(SupportStatements.deactivatedDevices, [since, cursorTime, cursorID, limit + 1])
                .map(UserDevice.init)
            return Page(rows: items, limit: limit) {
                TimeCursor(millis: items[$0].deactivatedAt ?? 0, id: String(items[$0].id))
            }
        }
    }
}

enum SupportStatements {
    /// A user's device tokens (not Live Activity tokens), active first, newest
    /// first: 1 the user.
    static let userDevices = Spelling("""
        SELECT \(UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
        WHERE d.user_id = $1 AND d.platform <> 'liveactivity'
        ORDER BY d.is_active DESC, d.registered_at DESC, d.id DESC
        """)

    /// A user's deliveries, newest first, before log id 2: 1 the user, 3 how many.
    /// The log id, then `DeliveryView.columns`.
    static let userDeliveries = Spelling("""
        SELECT d.id, \(DeliveryView.columns) FROM \(DeliveryView.tables)
        WHERE d.user_id = $1 AND d.id < $2 ORDER BY d.id DESC LIMIT $3
        """)

    /// Notifications, newest first, before a place in that order: 1 and 2 the
    /// place (time, id; a time of Int64.max lets every row through), 3 how many.
    /// Read by `NotificationSummary.init(_:)`.
    static let recentNotifications = Spelling(
        sqlite: """
            SELECT id, type, app_type, entity_id, created_at FROM notifications
            WHERE created_at < ?1 OR (created_at = ?1 AND id < ?2)
            ORDER BY created_at DESC, id DESC LIMIT ?3
            """,
        postgres: """
            SELECT id, type, app_type, entity_id, created_at FROM notifications
            WHERE created_at < $1 OR (created_at = $1 AND id COLLATE "C" < $2)
            ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT $3
            """)

    /// How many deliveries of notifications 1 (a list) are in each state: rows of
    /// notification, state, count.
    static let deliveryCounts = Spelling(
        sqlite: """
            SELECT d.notification_id, coalesce(r.state, d.state), count(*)
            FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
            WHERE d.notification_id IN (SELECT value FROM json_each(?1)) GROUP BY 1, 2
            """,
        postgres: """
            SELECT d.notification_id, coalesce(r.state, d.state), count(*)
            FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
            WHERE d.notification_id = ANY($1::text[]) GROUP BY 1, 2
            """)

    /// Device tokens deactivated since 1, newest first, before a place in that order:
    /// 2 and 3 the place (time, id), 4 how many. The inactive test is the partial
    /// index's own (`devices_inactive`).
    static let deactivatedDevices = Spelling(
        sqlite: """
            SELECT \(UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE d.is_active = 0 AND d.platform <> 'liveactivity' AND d.deactivated_at >= ?1
              AND (d.deactivated_at < ?2 OR (d.deactivated_at = ?2 AND d.id < ?3))
            ORDER BY d.deactivated_at DESC, d.id DESC LIMIT ?4
            """,
        postgres: """
            SELECT \(UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE NOT d.is_active AND d.platform <> 'liveactivity' AND d.deactivated_at >= $1
              AND (d.deactivated_at < $2 OR (d.deactivated_at = $2 AND d.id < $3))
            ORDER BY d.deactivated_at DESC, d.id DESC LIMIT $4
            """)
}

extension UserDevice {
    /// In this order on both engines (`devices d`, `device_use u`), read by `init(_:)`.
    static let columns = """
        d.id, d.user_id, d.app_type, d.token, d.platform, d.environment, d.device_name, d.os_version, d.app_version,
        d.is_active, d.deactivated_reason, d.deactivated_at, u.last_used_at, d.created_at, d.registered_at
        """

    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.int64(0), userID: try row.string(1), appType: try row.string(2), token: try row.string(3),
                  platform: try row.string(4), environment: try row.string(5), deviceName: try row.optionalString(6),
                  osVersion: try row.optionalString(7), appVersion: try row.optionalString(8),
                  isActive: try row.bool(9), deactivatedReason: try row.optionalString(10),
                  deactivatedAt: try row.optionalInt64(11), lastUsedAt: try row.optionalInt64(12),
                  createdAt: try row.int64(13), registeredAt: try row.int64(14))
    }
}

extension NotificationSummary {
    /// From `SupportStatements.recentNotifications`' columns; no counts yet.
    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.string(0), type: try row.string(1), appType: try row.string(2),
                  entityID: try row.optionalString(3), createdAt: try row.int64(4), counts: [:])
    }
}
