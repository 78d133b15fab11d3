import GRDB

// What support looks up (`SupportViewStore`): every list newest first, a page at a
// time, each page one more row than asked to tell whether another follows.

extension SQLiteStore {
    public func userDevices(userID: String) async throws(StoreError) -> [UserDevice] {
        try await read("list a user's devices") { db in
            try Row.fetchAll(db, sql: """
                SELECT \(UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
                WHERE d.user_id = ? AND d.platform <> 'liveactivity'
                ORDER BY d.is_active DESC, d.registered_at DESC, d.id DESC
                """, arguments: [userID]).map(UserDevice.init(row:))
        }
    }

    public func userDeliveries(userID: String, limit: Int,
                               before: Int64?) async throws(StoreError) -> Page<DeliveryView, Int64> {
        try await read("list a user's deliveries") { db in
            var ids: [Int64] = []
            var items: [DeliveryView] = []
            let rows = try Row.fetchCursor(db, sql: """
                SELECT d.id AS log_id, \(DeliveryView.columns) FROM \(DeliveryView.tables)
                WHERE d.user_id = ? AND d.id < ? ORDER BY d.id DESC LIMIT ?
                """, arguments: [userID, before ?? Int64.max, limit + 1])
            while let r = try rows.next() {
                ids.append(r["log_id"])
                items.append(DeliveryView(row: r))
            }
            return Page(rows: items, limit: limit) { ids[$0] }
        }
    }

    public func recentNotifications(limit: Int,
                                    before: TimeCursor?) async throws(StoreError) -> Page<NotificationSummary, TimeCursor> {
        try await read("list recent notifications") { db in
            let cursor = before ?? TimeCursor(millis: Int64.max, id: "")
            // Ties in time are ordered by id; a cursor at Int64.max lets every row through.
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, type, app_type, entity_id, created_at FROM notifications
                WHERE created_at < ? OR (created_at = ? AND id < ?)
                ORDER BY created_at DESC, id DESC LIMIT ?
                """, arguments: [cursor.millis, cursor.millis, cursor.id, limit + 1]).map { row in
                NotificationSummary(id: row["id"], type: row["type"], appType: row["app_type"],
                                    entityID: row["entity_id"], createdAt: row["created_at"], counts: [:])
            }
            var page = Page(rows: rows, limit: limit) { TimeCursor(millis: rows[$0].createdAt, id: rows[$0].id) }
            var counts: [String: [String: Int]] = [:]
            for r in try Row.fetchAll(db, sql: """
                SELECT d.notification_id, coalesce(r.state, d.state), count(*)
                FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                WHERE d.notification_id IN (SELECT value FROM json_each(?)) GROUP BY 1, 2
                """, arguments: [jsonArray(page.items.map(\.id))]) {
                counts[r[0], default: [:]][r[1]] = r[2]
            }
            for i in page.items.indices { page.items[i].counts = counts[page.items[i].id] ?? [:] }
            return page
        }
    }

    public func deactivatedDevices(since: Int64, limit: Int,
                                   before: TimeCursor?) async throws(StoreError) -> Page<UserDevice, TimeCursor> {
        try await read("list deactivated devices") { db in
            let cursorID = before.flatMap { Int64($0.id) } ?? Int64.max
            let cursorTime = before?.millis ?? Int64.max
            let items = try Row.fetchAll(db, sql: """
                SELECT \(UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
                WHERE d.is_active = 0 AND d.platform <> 'liveactivity' AND d.deactivated_at >= ?
                  AND (d.deactivated_at < ? OR (d.deactivated_at = ? AND d.id < ?))
                ORDER BY d.deactivated_at DESC, d.id DESC LIMIT ?
                """, arguments: [since, cursorTime, cursorTime, cursorID, limit + 1]).map(UserDevice.init(row:))
            return Page(rows: items, limit: limit) {
                TimeCursor(millis: items[$0].deactivatedAt ?? 0, id: String(items[$0].id))
            }
        }
    }
}

extension UserDevice {
    /// The same columns, in the same order, on both engines (`devices d`, `device_use u`).
    static let columns = """
        d.id, d.user_id, d.app_type, d.token, d.platform, d.environment, d.device_name, d.os_version, d.app_version,
        d.is_active, d.deactivated_reason, d.deactivated_at, u.last_used_at, d.created_at, d.registered_at
        """

    init(row: Row) {
        self.init(id: row["id"], userID: row["user_id"], appType: row["app_type"], token: row["token"],
                  platform: row["platform"], environment: row["environment"], deviceName: row["device_name"],
                  osVersion: row["os_version"], appVersion: row["app_version"], isActive: row["is_active"],
                  deactivatedReason: row["deactivated_reason"], deactivatedAt: row["deactivated_at"],
                  lastUsedAt: row["last_used_at"], createdAt: row["created_at"], registeredAt: row["registered_at"])
    }
}
