import PostgresNIO

// What support looks up (`SupportViewStore`): the same statements as SQLite's
// `SupportViews.swift`, in PostgreSQL's dialect. Ids are ordered byte-wise
// (COLLATE "C"), as SQLite orders them.

extension PostgresStore {
    public func userDevices(userID: String) async throws(StoreError) -> [UserDevice] {
        let doing = "list a user's devices"
        let found = try await rows(doing, """
            SELECT \(unescaped: UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE d.user_id = \(userID) AND d.platform <> 'liveactivity'
            ORDER BY d.is_active DESC, d.registered_at DESC, d.id DESC
            """)
        do {
            return try found.map { try UserDevice(postgres: $0) }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    public func userDeliveries(userID: String, limit: Int,
                               before: Int64?) async throws(StoreError) -> Page<DeliveryView, Int64> {
        let doing = "list a user's deliveries"
        let found = try await rows(doing, """
            SELECT d.id, \(unescaped: DeliveryView.postgresColumns) FROM \(unescaped: DeliveryView.postgresTables)
            WHERE d.user_id = \(userID) AND d.id < \(before ?? Int64.max) ORDER BY d.id DESC LIMIT \(Int64(limit) + 1)::bigint
            """)
        do {
            var ids: [Int64] = []
            var items: [DeliveryView] = []
            for r in found {
                ids.append(try r.get(0, Int64.self))
                items.append(try DeliveryView(postgres: r, from: 1))
            }
            return Page(rows: items, limit: limit) { ids[$0] }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    /// One snapshot (REPEATABLE READ): the page and its counts agree.
    public func recentNotifications(limit: Int,
                                    before: TimeCursor?) async throws(StoreError) -> Page<NotificationSummary, TimeCursor> {
        try await transaction("list recent notifications") { db in
            try await db.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            let cursor = before ?? TimeCursor(millis: Int64.max, id: "")
            var rows: [NotificationSummary] = []
            for row in try await db.rows("""
                SELECT id, type, app_type, entity_id, created_at FROM notifications
                WHERE created_at < \(cursor.millis) OR (created_at = \(cursor.millis) AND id COLLATE "C" < \(cursor.id))
                ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT \(Int64(limit) + 1)::bigint
                """) {
                rows.append(NotificationSummary(id: try row.get(0), type: try row.get(1), appType: try row.get(2),
                                                entityID: try row.get(3), createdAt: try row.get(4), counts: [:]))
            }
            var page = Page(rows: rows, limit: limit) { TimeCursor(millis: rows[$0].createdAt, id: rows[$0].id) }
            let ids = page.items.map(\.id)
            var counts: [String: [String: Int]] = [:]
            for r in try await db.rows("""
                SELECT d.notification_id, coalesce(r.state, d.state), count(*)
                FROM deliveries d LEFT JOIN results r ON r.delivery_id = d.id
                WHERE d.notification_id = ANY(\(ids)) GROUP BY 1, 2
                """) {
                counts[try r.get(0, String.self), default: [:]][try r.get(1, String.self)] = try r.get(2, Int.self)
            }
            for i in page.items.indices { page.items[i].counts = counts[page.items[i].id] ?? [:] }
            return page
        }
    }

    public func deactivatedDevices(since: Int64, limit: Int,
                                   before: TimeCursor?) async throws(StoreError) -> Page<UserDevice, TimeCursor> {
        let doing = "list deactivated devices"
        let cursorID = before.flatMap { Int64($0.id) } ?? Int64.max
        let cursorTime = before?.millis ?? Int64.max
        let found = try await rows(doing, """
            SELECT \(unescaped: UserDevice.columns) FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE NOT d.is_active AND d.platform <> 'liveactivity' AND d.deactivated_at >= \(since)
              AND (d.deactivated_at < \(cursorTime) OR (d.deactivated_at = \(cursorTime) AND d.id < \(cursorID)))
            ORDER BY d.deactivated_at DESC, d.id DESC LIMIT \(Int64(limit) + 1)::bigint
            """)
        do {
            let items = try found.map { try UserDevice(postgres: $0) }
            return Page(rows: items, limit: limit) {
                TimeCursor(millis: items[$0].deactivatedAt ?? 0, id: String(items[$0].id))
            }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }
}

extension UserDevice {
    /// `UserDevice.columns`, read from a PostgreSQL row.
    init(postgres row: PostgresRandomAccessRow) throws {
        self.init(id: try row.get(0), userID: try row.get(1), appType: try row.get(2), token: try row.get(3),
                  platform: try row.get(4), environment: try row.get(5), deviceName: try row.get(6),
                  osVersion: try row.get(7), appVersion: try row.get(8), isActive: try row.get(9),
                  deactivatedReason: try row.get(10), deactivatedAt: try row.get(11), lastUsedAt: try row.get(12),
                  createdAt: try row.get(13), registeredAt: try row.get(14))
    }
}
