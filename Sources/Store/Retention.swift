/// `RetentionStore`, once for both engines. Each call deletes one batch in one short
/// transaction; PostgreSQL instances pruning at once take different rows
/// (`FOR UPDATE SKIP LOCKED`) rather than wait on each other.
extension StoreEngine {
    /// Deletes, in one short transaction, up to `limit` notifications created before
    /// `cutoff` whose every delivery is final, with their deliveries, payloads and
    /// holds; and up to `limit` final broadcasts finished before it. A notification
    /// with anything still pending stays whole, however old: the log never loses
    /// the entry of a delivery that may yet be sent.
    ///
    /// A batched delivery of a newer notification may name a pruned carrier: it keeps
    /// its state and loses only the pointer (`carried_by` NULL; the foreign key would
    /// refuse the delete).
    public func pruneLog(before cutoff: Int64, limit: Int) async throws(StoreError) -> PruneResult {
        try await writing("prune the log") { c in
            var result = PruneResult()
            let ids = try await c.rows(RetentionStatements.finalNotifications, [cutoff, limit]).map { try $0.string(0) }
            if !ids.isEmpty {
                let list = StoreValue.list(ids)
                try await c.run(RetentionStatements.unlinkCarriers, [list])
                try await c.run(RetentionStatements.deleteHolds, [list])
                try await c.run(RetentionStatements.deleteResults, [list])
                // Counted without a row per delivery: PostgreSQL counts in the
                // statement; SQLite, whose WITH cannot hold a DELETE, reads `changes()`.
                switch c.engine {
                case .postgres:
                    result.deliveries = Int(try await c.int64(RetentionStatements.deleteDeliveries, [list]) ?? 0)
                case .sqlite:
                    try await c.run(RetentionStatements.deleteDeliveries, [list])
                    result.deliveries = Int(try await c.int64(RetentionStatements.changes, []) ?? 0)
                }
                try await c.run(RetentionStatements.deletePayloads, [list])
                result.notifications = try await c.rows(RetentionStatements.deleteNotifications, [list]).count
            }
            result.broadcasts = try await c.rows(RetentionStatements.deleteBroadcasts, [cutoff, limit]).count
            return result
        }
    }

    /// Deletes, in one short transaction, up to `limit` tokens deactivated before
    /// `cutoff` (logout, a 410, replaced by newer ones), with their Live Activity
    /// kind, last use and open windows; an activity whose last token went loses its
    /// owner. The delivery log keeps its own copy of each token and user.
    public func pruneDevices(inactiveBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune inactive devices") { c in
            let ids = try await c.rows(RetentionStatements.inactiveDevices, [cutoff, limit]).map { try $0.int64(0) }
            guard !ids.isEmpty else { return 0 }
            let activities = try await c.rows(RetentionStatements.activities, [ids])
                .map { (appType: try $0.string(0), activityID: try $0.string(1)) }
            try await c.run(RetentionStatements.deleteActivityTokens, [ids])
            try await c.run(RetentionStatements.deleteDeviceUse, [ids])
            try await c.run(RetentionStatements.deleteDeviceHolds, [ids])
            let pruned = try await c.rows(RetentionStatements.deleteDevices, [ids]).count
            if !activities.isEmpty {
                try await c.run(RetentionStatements.orphanActivities,
                                [StoreValue.list(activities.map(\.appType)), StoreValue.list(activities.map(\.activityID))])
            }
            return pruned
        }
    }
}

enum RetentionStatements {
    /// Up to 2 notifications created before 1 with no delivery pending (pending and
    /// unanswered), oldest first. PostgreSQL locks those it takes.
    static let finalNotifications = Spelling(
        sqlite: """
            SELECT n.id FROM notifications n
            WHERE n.created_at < ?1
              AND NOT EXISTS (SELECT 1 FROM deliveries d
                              WHERE d.notification_id = n.id AND d.state = 'pending'
                                AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id))
            ORDER BY n.created_at LIMIT ?2
            """,
        postgres: """
            SELECT n.id FROM notifications n
            WHERE n.created_at < $1
              AND NOT EXISTS (SELECT 1 FROM deliveries d
                              WHERE d.notification_id = n.id AND d.state = 'pending'
                                AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id))
            ORDER BY n.created_at LIMIT $2
            FOR UPDATE OF n SKIP LOCKED
            """)

    /// The pruned notifications' deliveries (1 the notifications), inside the
    /// statements below.
    private static let sqlitePrunedDeliveries =
        "SELECT id FROM deliveries WHERE notification_id IN (SELECT value FROM json_each(?1))"
    private static let postgresPrunedDeliveries = "SELECT id FROM deliveries WHERE notification_id = ANY($1)"

    /// Other notifications' batched deliveries lose their pruned carrier: 1 the
    /// notifications.
    static let unlinkCarriers = Spelling(
        sqlite: """
            UPDATE deliveries SET carried_by = NULL
            WHERE carried_by IN (\(sqlitePrunedDeliveries))
              AND notification_id NOT IN (SELECT value FROM json_each(?1))
            """,
        postgres: """
            UPDATE deliveries SET carried_by = NULL
            WHERE carried_by IN (\(postgresPrunedDeliveries)) AND NOT (notification_id = ANY($1))
            """)

    /// 1 the notifications.
    static let deleteHolds = Spelling(
        sqlite: "DELETE FROM holds WHERE delivery_id IN (\(sqlitePrunedDeliveries))",
        postgres: "DELETE FROM holds WHERE delivery_id IN (\(postgresPrunedDeliveries))")

    /// 1 the notifications.
    static let deleteResults = Spelling(
        sqlite: "DELETE FROM results WHERE delivery_id IN (\(sqlitePrunedDeliveries))",
        postgres: "DELETE FROM results WHERE delivery_id IN (\(postgresPrunedDeliveries))")

    /// 1 the notifications. PostgreSQL's returns how many went; SQLite's nothing
    /// (`changes` tells).
    static let deleteDeliveries = Spelling(
        sqlite: "DELETE FROM deliveries WHERE notification_id IN (SELECT value FROM json_each(?1))",
        postgres: """
            WITH gone AS (DELETE FROM deliveries WHERE notification_id = ANY($1) RETURNING 1)
            SELECT count(*) FROM gone
            """)

    /// SQLite only: how many rows the last statement changed.
    static let changes = Spelling.only(sqlite: "SELECT changes()")

    /// 1 the notifications.
    static let deletePayloads = Spelling(
        sqlite: "DELETE FROM payloads WHERE notification_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM payloads WHERE notification_id = ANY($1)")

    /// 1 the notifications; one row each.
    static let deleteNotifications = Spelling(
        sqlite: "DELETE FROM notifications WHERE id IN (SELECT value FROM json_each(?1)) RETURNING 1",
        postgres: "DELETE FROM notifications WHERE id = ANY($1) RETURNING 1")

    /// Up to 2 final broadcasts finished before 1, oldest first; one row each.
    static let deleteBroadcasts = Spelling(
        sqlite: """
            DELETE FROM broadcasts WHERE id IN (
                SELECT id FROM broadcasts WHERE state <> 'pending' AND finished_at < ?1 ORDER BY finished_at LIMIT ?2)
            RETURNING 1
            """,
        postgres: """
            DELETE FROM broadcasts WHERE id IN (
                SELECT id FROM broadcasts WHERE state <> 'pending' AND finished_at < $1
                ORDER BY finished_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING 1
            """)

    /// Up to 2 devices deactivated before 1, oldest first. SQLite never takes the
    /// newest row: it gives a new row the largest id plus one, and an id a pending
    /// delivery or a hold still names must not come back as another device
    /// (PostgreSQL's sequence never gives an id twice). PostgreSQL locks those it takes.
    static let inactiveDevices = Spelling(
        sqlite: """
            SELECT id FROM devices
            WHERE is_active = 0 AND deactivated_at < ?1 AND id < (SELECT max(id) FROM devices)
            ORDER BY deactivated_at LIMIT ?2
            """,
        postgres: """
            SELECT id FROM devices WHERE NOT is_active AND deactivated_at < $1
            ORDER BY deactivated_at LIMIT $2
            FOR UPDATE SKIP LOCKED
            """)

    /// The Live Activities the devices (1) hold tokens of: app, activity.
    static let activities = Spelling(
        sqlite: """
            SELECT DISTINCT d.app_type, l.activity_id FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
            WHERE l.device_id IN (SELECT value FROM json_each(?1)) AND l.activity_id IS NOT NULL
            """,
        postgres: """
            SELECT DISTINCT d.app_type, l.activity_id FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
            WHERE l.device_id = ANY($1::bigint[]) AND l.activity_id IS NOT NULL
            """)

    /// 1 the devices.
    static let deleteActivityTokens = Spelling(
        sqlite: "DELETE FROM live_activity_tokens WHERE device_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM live_activity_tokens WHERE device_id = ANY($1::bigint[])")

    /// 1 the devices.
    static let deleteDeviceUse = Spelling(
        sqlite: "DELETE FROM device_use WHERE device_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM device_use WHERE device_id = ANY($1::bigint[])")

    /// 1 the devices.
    static let deleteDeviceHolds = Spelling(
        sqlite: "DELETE FROM holds WHERE device_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM holds WHERE device_id = ANY($1::bigint[])")

    /// 1 the devices; one row each.
    static let deleteDevices = Spelling(
        sqlite: "DELETE FROM devices WHERE id IN (SELECT value FROM json_each(?1)) RETURNING 1",
        postgres: "DELETE FROM devices WHERE id = ANY($1::bigint[]) RETURNING 1")

    /// Of these Live Activities (1 their apps, 2 their ids, pairwise), those no
    /// device's token names any more lose their owner.
    static let orphanActivities = Spelling(
        sqlite: """
            DELETE FROM live_activities
            WHERE (app_type, activity_id) IN (SELECT a.value, i.value FROM json_each(?1) a JOIN json_each(?2) i ON i.key = a.key)
              AND NOT EXISTS (SELECT 1 FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                              WHERE l.activity_id = live_activities.activity_id AND d.app_type = live_activities.app_type)
            """,
        postgres: """
            DELETE FROM live_activities a
            USING unnest($1::text[], $2::text[]) AS g (app_type, activity_id)
            WHERE a.app_type = g.app_type AND a.activity_id = g.activity_id
              AND NOT EXISTS (SELECT 1 FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                              WHERE l.activity_id = a.activity_id AND d.app_type = a.app_type)
            """)
}
