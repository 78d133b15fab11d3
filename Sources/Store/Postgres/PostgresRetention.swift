import PostgresNIO

extension PostgresStore {
    /// As SQLite's `pruneLog`: up to `limit` notifications created before `cutoff`
    /// whose every delivery is final go, with their deliveries, payloads and holds,
    /// and up to `limit` broadcasts finished before it; one short transaction.
    ///
    /// Several instances prune at once without waiting on each other: each locks
    /// the notifications it takes (`FOR UPDATE SKIP LOCKED`) and the others take
    /// the next ones.
    public func pruneLog(before cutoff: Int64, limit: Int) async throws(StoreError) -> PruneResult {
        try await transaction("prune the log") { db in
            var result = PruneResult()
            let ids = try await db.rows("""
                SELECT n.id FROM notifications n
                WHERE n.created_at < \(cutoff)
                  AND NOT EXISTS (SELECT 1 FROM deliveries d
                                  WHERE d.notification_id = n.id AND d.state = 'pending'
                                    AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id))
                ORDER BY n.created_at LIMIT \(limit)
                FOR UPDATE OF n SKIP LOCKED
                """).map { try $0.get(0, String.self) }
            if !ids.isEmpty {
                // A batched delivery of a newer notification keeps its state and loses
                // only the pointer to a pruned carrier (the foreign key would refuse).
                try await db.run("""
                    UPDATE deliveries SET carried_by = NULL
                    WHERE carried_by IN (SELECT id FROM deliveries WHERE notification_id = ANY(\(ids)))
                      AND NOT (notification_id = ANY(\(ids)))
                    """)
                try await db.run("""
                    DELETE FROM holds WHERE delivery_id IN (SELECT id FROM deliveries WHERE notification_id = ANY(\(ids)))
                    """)
                try await db.run("""
                    DELETE FROM results WHERE delivery_id IN (SELECT id FROM deliveries WHERE notification_id = ANY(\(ids)))
                    """)
                result.deliveries = try await db.rows("""
                    WITH gone AS (DELETE FROM deliveries WHERE notification_id = ANY(\(ids)) RETURNING 1)
                    SELECT count(*) FROM gone
                    """)[0].get(0, Int.self)
                try await db.run("DELETE FROM payloads WHERE notification_id = ANY(\(ids))")
                result.notifications = try await db.rows("""
                    WITH gone AS (DELETE FROM notifications WHERE id = ANY(\(ids)) RETURNING 1)
                    SELECT count(*) FROM gone
                    """)[0].get(0, Int.self)
            }
            result.broadcasts = try await db.rows("""
                WITH gone AS (
                    DELETE FROM broadcasts WHERE id IN (
                        SELECT id FROM broadcasts WHERE state <> 'pending' AND finished_at < \(cutoff)
                        ORDER BY finished_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                    RETURNING 1)
                SELECT count(*) FROM gone
                """)[0].get(0, Int.self)
            return result
        }
    }
}

extension PostgresStore {
    /// As SQLite's `pruneDevices`: up to `limit` tokens deactivated before `cutoff`
    /// go, with their Live Activity kind, last use and open windows; an activity whose last
    /// token went loses its owner. Instances pruning at once take different rows.
    public func pruneDevices(inactiveBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await transaction("prune inactive devices") { db in
            let ids = try await db.rows("""
                SELECT id FROM devices WHERE NOT is_active AND deactivated_at < \(cutoff)
                ORDER BY deactivated_at LIMIT \(limit)
                FOR UPDATE SKIP LOCKED
                """).map { try $0.get(0, Int64.self) }
            guard !ids.isEmpty else { return 0 }
            let activities = try await db.rows("""
                SELECT DISTINCT d.app_type, l.activity_id FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                WHERE l.device_id = ANY(\(ids)) AND l.activity_id IS NOT NULL
                """).map { (try $0.get(0, String.self), try $0.get(1, String.self)) }
            try await db.run("DELETE FROM live_activity_tokens WHERE device_id = ANY(\(ids))")
            try await db.run("DELETE FROM device_use WHERE device_id = ANY(\(ids))")
            try await db.run("DELETE FROM holds WHERE device_id = ANY(\(ids))")
            let pruned = try await db.rows("""
                WITH gone AS (DELETE FROM devices WHERE id = ANY(\(ids)) RETURNING 1) SELECT count(*) FROM gone
                """)[0].get(0, Int.self)
            if !activities.isEmpty {
                try await db.run("""
                    DELETE FROM live_activities a
                    USING unnest(\(activities.map(\.0))::text[], \(activities.map(\.1))::text[]) AS g (app_type, activity_id)
                    WHERE a.app_type = g.app_type AND a.activity_id = g.activity_id
                      AND NOT EXISTS (SELECT 1 FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                                      WHERE l.activity_id = a.activity_id AND d.app_type = a.app_type)
                    """)
            }
            return pruned
        }
    }
}
