import PostgresNIO

extension PostgresStore: IdempotencyKeys {
    /// As SQLite's. Two instances inserting the same key at once: the unique index
    /// makes the second wait for the first's commit, then find its row.
    public func claimIdempotencyKey(scope: String, key: String, fingerprint: String, resourceID: String,
                                    now: Int64, leaseMillis: Int64,
                                    expiredBefore: Int64) async throws(StoreError) -> IdempotencyClaim {
        try await transaction("claim an idempotency key") { db in
            try await db.run("""
                DELETE FROM idempotency_keys WHERE scope = \(scope) AND idempotency_key = \(key) AND created_at < \(expiredBefore)
                """)
            let inserted = try await db.rows("""
                INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, resource_id, created_at, claimed_until)
                VALUES (\(scope), \(key), \(fingerprint), \(resourceID), \(now), \(now + leaseMillis))
                ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING 1
                """)
            if !inserted.isEmpty { return .claimed(resourceID: resourceID, resumed: false) }
            guard let row = try await db.rows("""
                SELECT fingerprint, resource_id, status, body, claimed_until FROM idempotency_keys
                WHERE scope = \(scope) AND idempotency_key = \(key) FOR UPDATE
                """).first
            else { throw StoreError("the idempotency key vanished while claimed") }
            let held = try row.get(0, String.self)
            if let status = try row.get(2, Int?.self) {
                let body = try row.get(3, ByteBuffer?.self).map { Array($0.readableBytesView) } ?? []
                return .answered(fingerprint: held, status: status, body: body)
            }
            guard held == fingerprint, try row.get(4, Int64.self) < now else { return .busy(fingerprint: held) }
            try await db.run("""
                UPDATE idempotency_keys SET claimed_until = \(now + leaseMillis) WHERE scope = \(scope) AND idempotency_key = \(key)
                """)
            return .claimed(resourceID: try row.get(1, String.self), resumed: true)
        }
    }

    public func answerIdempotencyKey(scope: String, key: String, resourceID: String,
                                     status: Int, body: [UInt8]) async throws(StoreError) {
        _ = try await rows("record an idempotent answer", """
            UPDATE idempotency_keys SET status = \(status), body = \(ByteBuffer(bytes: body))
            WHERE scope = \(scope) AND idempotency_key = \(key) AND resource_id = \(resourceID)
            """)
    }

    public func releaseIdempotencyKey(scope: String, key: String, resourceID: String) async throws(StoreError) {
        _ = try await rows("release an idempotency key", """
            DELETE FROM idempotency_keys
            WHERE scope = \(scope) AND idempotency_key = \(key) AND resource_id = \(resourceID) AND status IS NULL
            """)
    }

    public func pruneIdempotencyKeys(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await transaction("prune idempotency keys") { db in
            try await db.rows("""
            WITH gone AS (
                DELETE FROM idempotency_keys WHERE (scope, idempotency_key) IN (
                    SELECT scope, idempotency_key FROM idempotency_keys WHERE created_at < \(cutoff)
                    ORDER BY created_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1)
            SELECT count(*) FROM gone
            """)[0].get(0, Int.self)
        }
    }
}
