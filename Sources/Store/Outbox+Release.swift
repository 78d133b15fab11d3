import GRDB

// Added on the service branch: main's protocol has `release`, the store branch did
// not implement it yet. Minimal: the rows this worker holds go back to pending from
// `availableAt`, their lease cleared and the attempt counted; apns-ids stay.
extension SQLiteStore {
    public func release(worker: String, deliveryIDs: [Int64], availableAt: Int64,
                        now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await write("release deliveries") { db in
            let ids = jsonArray(deliveryIDs)
            // Count first, while claimed_by still proves this worker holds them.
            try db.execute(sql: """
                UPDATE deliveries SET attempts = attempts + 1
                WHERE id IN (SELECT delivery_id FROM outbox
                             WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?)))
                """, arguments: [worker, ids])
            try db.execute(sql: """
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL, available_at = ?
                WHERE claimed_by = ? AND delivery_id IN (SELECT value FROM json_each(?))
                """, arguments: [availableAt, worker, ids])
        }
    }
}
