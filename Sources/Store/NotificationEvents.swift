/// `NotificationEventStore`, once for both engines.
extension StoreEngine {
    public func recordNotificationEvent(apnsID: String, userID: String, _ event: NotificationEvent, at: Int64,
                                        now: Int64) async throws(StoreError) -> NotificationEventRecord? {
        try await writing("record a notification event") { c -> NotificationEventRecord? in
            guard let row = try await c.row(NotificationEventStatements.delivery, [apnsID, userID]) else { return nil }
            let state = try row.string(6)
            guard state == "delivered" else { return .notDelivered(state: state) }
            let at = max(at, try row.optionalInt64(7) ?? at)
            let deliveryID = try row.int64(0), notificationID = try row.string(1)
            let before: (received: Int64?, opened: Int64?)
            switch c.engine {
            case .sqlite:
                // One writer: the times read with the delivery are still the row's.
                before = (try row.optionalInt64(4), try row.optionalInt64(5))
            case .postgres:
                // Two reports at once on two instances: the row is made first and then
                // locked, so that each reads the other's times and each time is set once.
                try await c.run(NotificationEventStatements.makeRow, [deliveryID, notificationID])
                let times = try await c.row(NotificationEventStatements.lockTimes, [deliveryID])
                before = (try times?.optionalInt64(0) ?? nil, try times?.optionalInt64(1) ?? nil)
            }
            let received = before.received ?? at
            let opened = event == .opened ? (before.opened ?? at) : before.opened
            var new: [NotificationEvent] = []
            if before.received == nil { new.append(.received) }
            if before.opened == nil, opened != nil { new.append(.opened) }
            if !new.isEmpty {
                try await c.run(NotificationEventStatements.setTimes, [deliveryID, notificationID, received, opened])
            }
            return .recorded(NotificationEventResult(appType: try row.string(2), type: try row.string(3),
                                                     receivedAt: received, openedAt: opened, new: new))
        }
    }

    public func notificationEngagement(notificationID: String,
                                       apnsIDs: [String]) async throws(StoreError) -> NotificationEngagement {
        try await reading("read notification events") { c in
            var engagement = NotificationEngagement()
            if let counts = try await c.row(NotificationEventStatements.counts, [notificationID]) {
                engagement.received = try counts.int(0)
                engagement.opened = try counts.int(1)
            }
            guard engagement.received > 0, !apnsIDs.isEmpty else { return engagement }
            for row in try await c.rows(NotificationEventStatements.times, [notificationID, StoreValue.list(apnsIDs)]) {
                engagement.times[try row.string(0)] = (try row.optionalInt64(1), try row.optionalInt64(2))
            }
            return engagement
        }
    }

    public func pruneNotificationEvents(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune notification events") { c in
            try await c.rows(NotificationEventStatements.prune, [cutoff, limit]).count
        }
    }
}

enum NotificationEventStatements {
    /// The delivery a report names, if it is the user's: id, notification, app, type,
    /// received and opened times as last written, state, finish time. 1 apns-id, 2 user.
    static let delivery = Spelling("""
        SELECT d.id, d.notification_id, n.app_type, n.type, e.received_at, e.opened_at,
               coalesce(r.state, d.state), coalesce(r.finished_at, d.finished_at)
        FROM deliveries d JOIN notifications n ON n.id = d.notification_id
        LEFT JOIN results r ON r.delivery_id = d.id
        LEFT JOIN delivery_events e ON e.delivery_id = d.id
        WHERE d.apns_id = $1 AND d.user_id = $2
        """)

    /// A delivery's row of times, empty if it has none yet: 1 delivery, 2 notification.
    static let makeRow = Spelling("""
        INSERT INTO delivery_events (delivery_id, notification_id) VALUES ($1, $2)
        ON CONFLICT (delivery_id) DO NOTHING
        """)

    /// The times of delivery 1, locked until the report commits.
    static let lockTimes = Spelling("""
        SELECT received_at, opened_at FROM delivery_events WHERE delivery_id = $1 FOR UPDATE
        """)

    /// 1 delivery, 2 notification, 3 received, 4 opened.
    static let setTimes = Spelling("""
        INSERT INTO delivery_events (delivery_id, notification_id, received_at, opened_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (delivery_id) DO UPDATE SET received_at = excluded.received_at, opened_at = excluded.opened_at
        """)

    /// How many of notification 1's deliveries were received, and opened.
    static let counts = Spelling("""
        SELECT count(received_at), count(opened_at) FROM delivery_events WHERE notification_id = $1
        """)

    /// apns-id, received, opened of notification 1's reported deliveries among the
    /// apns-ids 2.
    static let times = Spelling(
        sqlite: """
            SELECT d.apns_id, e.received_at, e.opened_at
            FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
            WHERE e.notification_id = ?1 AND d.apns_id IN (SELECT value FROM json_each(?2))
            """,
        postgres: """
            SELECT d.apns_id, e.received_at, e.opened_at
            FROM delivery_events e JOIN deliveries d ON d.id = e.delivery_id
            WHERE e.notification_id = $1 AND d.apns_id = ANY($2::text[])
            """)

    /// Reports of deliveries received before 1, at most 2 of them; one row each.
    static let prune = Spelling("""
        DELETE FROM delivery_events WHERE delivery_id IN (
            SELECT delivery_id FROM delivery_events WHERE received_at < $1 LIMIT $2)
        RETURNING 1
        """)
}
