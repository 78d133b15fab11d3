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
                  AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.notification_id = n.id AND d.state = 'pending')
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
