import GRDB

extension SQLiteStore {
    /// Deletes, in one short transaction, up to `limit` notifications created before
    /// `cutoff` whose every delivery is final, with their deliveries, payloads and
    /// holds; and up to `limit` final broadcasts finished before it. A notification
    /// with anything still pending stays whole, however old: the log never loses
    /// the entry of a delivery that may yet be sent.
    ///
    /// A batched delivery of a newer notification may name a pruned carrier: it keeps
    /// its state and loses only the pointer (`carried_by` NULL).
    public func pruneLog(before cutoff: Int64, limit: Int) async throws(StoreError) -> PruneResult {
        try await write("prune the log") { db in
            let ids = try String.fetchAll(db, sql: """
                SELECT n.id FROM notifications n
                WHERE n.created_at < ?
                  AND NOT EXISTS (SELECT 1 FROM deliveries d
                                  WHERE d.notification_id = n.id AND d.state = 'pending'
                                    AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id))
                ORDER BY n.created_at LIMIT ?
                """, arguments: [cutoff, limit])
            var result = PruneResult()
            if !ids.isEmpty {
                try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS pruned (id TEXT PRIMARY KEY) WITHOUT ROWID")
                try db.execute(sql: "DELETE FROM temp.pruned")
                let insert = try db.cachedStatement(sql: "INSERT INTO temp.pruned (id) VALUES (?)")
                for id in ids { try insert.execute(arguments: [id]) }
                let doomed = "SELECT d.id FROM deliveries d JOIN temp.pruned p ON p.id = d.notification_id"
                try db.execute(sql: """
                    UPDATE deliveries SET carried_by = NULL
                    WHERE carried_by IN (\(doomed)) AND notification_id NOT IN (SELECT id FROM temp.pruned)
                    """)
                try db.execute(sql: "DELETE FROM holds WHERE delivery_id IN (\(doomed))")
                try db.execute(sql: "DELETE FROM results WHERE delivery_id IN (\(doomed))")
                try db.execute(sql: "DELETE FROM deliveries WHERE notification_id IN (SELECT id FROM temp.pruned)")
                result.deliveries = db.changesCount
                try db.execute(sql: "DELETE FROM payloads WHERE notification_id IN (SELECT id FROM temp.pruned)")
                try db.execute(sql: "DELETE FROM notifications WHERE id IN (SELECT id FROM temp.pruned)")
                result.notifications = db.changesCount
                try db.execute(sql: "DELETE FROM temp.pruned")
            }
            try db.execute(sql: """
                DELETE FROM broadcasts WHERE id IN (
                    SELECT id FROM broadcasts WHERE state <> 'pending' AND finished_at < ? ORDER BY finished_at LIMIT ?)
                """, arguments: [cutoff, limit])
            result.broadcasts = db.changesCount
            return result
        }
    }
}

extension SQLiteStore {
    /// Deletes, in one short transaction, up to `limit` tokens deactivated before
    /// `cutoff` (logout, a 410, replaced by newer ones), with their Live Activity
    /// kind, last use and open windows; an activity whose last token went loses its
    /// owner. The delivery log keeps its own copy of each token and user.
    public func pruneDevices(inactiveBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune inactive devices") { db in
            // Never the newest row: SQLite gives a new row the largest id plus one, and
            // an id a pending delivery or a hold still names must not come back as
            // another device.
            let ids = try Int64.fetchAll(db, sql: """
                SELECT id FROM devices
                WHERE is_active = 0 AND deactivated_at < ? AND id < (SELECT max(id) FROM devices)
                ORDER BY deactivated_at LIMIT ?
                """, arguments: [cutoff, limit])
            guard !ids.isEmpty else { return 0 }
            let doomed = "SELECT value FROM json_each(?)"
            let list = jsonArray(ids)
            let activities = try Row.fetchAll(db, sql: """
                SELECT DISTINCT d.app_type, l.activity_id FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                WHERE l.device_id IN (\(doomed)) AND l.activity_id IS NOT NULL
                """, arguments: [list])
            try db.execute(sql: "DELETE FROM live_activity_tokens WHERE device_id IN (\(doomed))", arguments: [list])
            try db.execute(sql: "DELETE FROM device_use WHERE device_id IN (\(doomed))", arguments: [list])
            try db.execute(sql: "DELETE FROM holds WHERE device_id IN (\(doomed))", arguments: [list])
            try db.execute(sql: "DELETE FROM devices WHERE id IN (\(doomed))", arguments: [list])
            let pruned = db.changesCount
            let orphan = try db.cachedStatement(sql: """
                DELETE FROM live_activities
                WHERE app_type = ?1 AND activity_id = ?2
                  AND NOT EXISTS (SELECT 1 FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                                  WHERE l.activity_id = ?2 AND d.app_type = ?1)
                """)
            for row in activities {
                try orphan.execute(arguments: [row[0] as String, row[1] as String])
            }
            return pruned
        }
    }
}
