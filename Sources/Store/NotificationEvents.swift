import GRDB

extension SQLiteStore {
    public func recordNotificationEvent(apnsID: String, userID: String, _ event: NotificationEvent, at: Int64,
                                        now: Int64) async throws(StoreError) -> NotificationEventRecord? {
        try await write("record a notification event") { db -> NotificationEventRecord? in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT d.id, d.notification_id, n.app_type, n.type, e.received_at, e.opened_at,
                       coalesce(r.state, d.state), coalesce(r.finished_at, d.finished_at)
                FROM deliveries d JOIN notifications n ON n.id = d.notification_id
                LEFT JOIN results r ON r.delivery_id = d.id
                LEFT JOIN delivery_events e ON e.delivery_id = d.id
                WHERE d.apns_id = ? AND d.user_id = ?
                """, arguments: [apnsID, userID]) else { return nil }
            let state: String = row[6]
            guard state == "delivered" else { return .notDelivered(state: state) }
            let at = max(at, row[7] as Int64? ?? at)
            let before: (received: Int64?, opened: Int64?) = (row[4], row[5])
            let received = before.received ?? at
            let opened = event == .opened ? (before.opened ?? at) : before.opened
            var new: [NotificationEvent] = []
            if before.received == nil { new.append(.received) }
            if before.opened == nil, opened != nil { new.append(.opened) }
            if !new.isEmpty {
                try db.execute(sql: """
                    INSERT INTO delivery_events (delivery_id, notification_id, received_at, opened_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (delivery_id) DO UPDATE SET received_at = excluded.received_at, opened_at = excluded.opened_at
                    """, arguments: [row[0] as Int64, row[1] as String, received, opened])
            }
            return .recorded(NotificationEventResult(appType: row[2], type: row[3], receivedAt: received, openedAt: opened,
                                                     new: new))
        }
    }

    public func notificationEngagement(notificationID: String,
                                       apnsIDs: [String]) async throws(StoreError) -> NotificationEngagement {
        try await read("read notification events") { db in
            var engagement = NotificationEngagement()
            if let counts = try Row.fetchOne(db, sql: """
                SELECT count(received_at), count(opened_at) FROM delivery_events WHERE notification_id = ?
                """, arguments: [notificationID]) {
                engagement.received = counts[0]
                engagement.opened = counts[1]
            }
            guard engagement.received > 0, !apnsIDs.isEmpty else { return engagement }
            for row in try Row.fetchAll(db, sql: """
                SELECT d.apns_id, e.received_at, e.opened_at
                FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
                WHERE e.notification_id = ? AND d.apns_id IN (SELECT value FROM json_each(?))
                """, arguments: [notificationID, jsonArray(apnsIDs)]) {
                engagement.times[row[0]] = (row[1], row[2])
            }
            return engagement
        }
    }

    public func pruneNotificationEvents(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune notification events") { db in
            try db.execute(sql: """
                DELETE FROM delivery_events WHERE delivery_id IN (
                    SELECT delivery_id FROM delivery_events WHERE received_at < ? LIMIT ?)
                """, arguments: [cutoff, limit])
            return db.changesCount
        }
    }
}
