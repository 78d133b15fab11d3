import PostgresNIO

// Receipts and opens on PostgreSQL: the same rows and meanings as on SQLite (see
// NotificationEvents.swift).

extension PostgresStore {
    public func recordNotificationEvent(apnsID: String, userID: String, _ event: NotificationEvent, at: Int64,
                                        now: Int64) async throws(StoreError) -> NotificationEventRecord? {
        try await transaction("record a notification event") { db -> NotificationEventRecord? in
            guard let row = try await db.rows("""
                SELECT d.id, d.notification_id, n.app_type, n.type, coalesce(r.state, d.state), coalesce(r.finished_at, d.finished_at)
                FROM deliveries d JOIN notifications n ON n.id = d.notification_id
                LEFT JOIN results r ON r.delivery_id = d.id
                WHERE d.apns_id = \(apnsID) AND d.user_id = \(userID)
                """).first else { return nil }
            let state = try row.get(4, String.self)
            guard state == "delivered" else { return .notDelivered(state: state) }
            let at = max(at, try row.get(5, Int64?.self) ?? at)
            let deliveryID = try row.get(0, Int64.self), notificationID = try row.get(1, String.self)
            // The row is made first and then locked, so that two reports at once
            // read one another's times and each time is set once.
            try await db.run("""
                INSERT INTO delivery_events (delivery_id, notification_id) VALUES (\(deliveryID), \(notificationID))
                ON CONFLICT (delivery_id) DO NOTHING
                """)
            let times = try await db.rows("""
                SELECT received_at, opened_at FROM delivery_events WHERE delivery_id = \(deliveryID) FOR UPDATE
                """).first
            let before: (received: Int64?, opened: Int64?) = (try times?.get(0, Int64?.self) ?? nil,
                                                              try times?.get(1, Int64?.self) ?? nil)
            let received = before.received ?? at
            let opened = event == .opened ? (before.opened ?? at) : before.opened
            var new: [NotificationEvent] = []
            if before.received == nil { new.append(.received) }
            if before.opened == nil, opened != nil { new.append(.opened) }
            try await db.run("""
                UPDATE delivery_events SET received_at = \(received), opened_at = \(opened)::bigint
                WHERE delivery_id = \(deliveryID)
                """)
            return .recorded(NotificationEventResult(appType: try row.get(2), type: try row.get(3), receivedAt: received,
                                                     openedAt: opened, new: new))
        }
    }

    public func notificationEngagement(notificationID: String,
                                       apnsIDs: [String]) async throws(StoreError) -> NotificationEngagement {
        try await transaction("read notification events") { db in
            var engagement = NotificationEngagement()
            if let counts = try await db.rows("""
                SELECT count(received_at), count(opened_at) FROM delivery_events WHERE notification_id = \(notificationID)
                """).first {
                engagement.received = try counts.get(0, Int.self)
                engagement.opened = try counts.get(1, Int.self)
            }
            guard engagement.received > 0, !apnsIDs.isEmpty else { return engagement }
            for row in try await db.rows("""
                SELECT d.apns_id, e.received_at, e.opened_at
                FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
                WHERE e.notification_id = \(notificationID) AND d.apns_id = ANY(\(apnsIDs)::text[])
                """) {
                engagement.times[try row.get(0, String.self)] = (try row.get(1, Int64?.self), try row.get(2, Int64?.self))
            }
            return engagement
        }
    }

    public func pruneNotificationEvents(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await rows("prune notification events", """
            DELETE FROM delivery_events WHERE delivery_id IN (
                SELECT delivery_id FROM delivery_events WHERE received_at < \(cutoff) LIMIT \(Int64(limit)))
            RETURNING delivery_id
            """).count
    }
}
