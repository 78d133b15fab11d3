/// `IdempotencyKeys`, once for both engines. Two requests inserting the same key at
/// once: the unique (scope, key) makes the second wait for the first's commit (on
/// PostgreSQL; SQLite's one writer runs them in turn), then find its row.
extension StoreEngine {
    public func claimIdempotencyKey(scope: String, key: String, fingerprint: String, resourceID: String,
                                    now: Int64, leaseMillis: Int64,
                                    expiredBefore: Int64) async throws(StoreError) -> IdempotencyClaim {
        try await writing("claim an idempotency key") { c in
            try await c.run(IdempotencyStatements.forgetExpired, [scope, key, expiredBefore])
            let inserted = try await c.rows(IdempotencyStatements.insert,
                                            [scope, key, fingerprint, resourceID, now, now + leaseMillis])
            if !inserted.isEmpty { return .claimed(resourceID: resourceID, resumed: false) }
            guard let row = try await c.row(IdempotencyStatements.held, [scope, key])
            else { throw StoreError("the idempotency key vanished while claimed") }
            let held = try row.string(0)
            if let status = try row.optionalInt(2) {
                return .answered(fingerprint: held, status: status, body: try row.byteArray(3))
            }
            guard held == fingerprint, try row.int64(4) < now else { return .busy(fingerprint: held) }
            try await c.run(IdempotencyStatements.extendLease, [now + leaseMillis, scope, key])
            return .claimed(resourceID: try row.string(1), resumed: true)
        }
    }

    public func answerIdempotencyKey(scope: String, key: String, resourceID: String,
                                     status: Int, body: [UInt8]) async throws(StoreError) {
        try await writing("record an idempotent answer") { c in
            try await c.run(IdempotencyStatements.answer, [status, StoreValue.blob(body), scope, key, resourceID])
        }
    }

    public func releaseIdempotencyKey(scope: String, key: String, resourceID: String) async throws(StoreError) {
        try await writing("release an idempotency key") { c in
            try await c.run(IdempotencyStatements.release, [scope, key, resourceID])
        }
    }

    public func pruneIdempotencyKeys(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune idempotency keys") { c in
            try await c.rows(IdempotencyStatements.prune, [cutoff, limit]).count
        }
    }
}

enum IdempotencyStatements {
    /// A row retention ended but has not pruned yet counts as absent: 1 scope, 2 key,
    /// 3 the oldest creation still alive.
    static let forgetExpired = Spelling("""
        DELETE FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND created_at < $3
        """)

    /// One row when this request now holds the key, none when another row holds it:
    /// 1 scope, 2 key, 3 fingerprint, 4 resource id, 5 now, 6 lease end.
    static let insert = Spelling("""
        INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, resource_id, created_at, claimed_until)
        VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (scope, idempotency_key) DO NOTHING RETURNING 1
        """)

    /// The row that holds the key: fingerprint, resource id, status, body (empty when
    /// none), lease end. 1 scope, 2 key. PostgreSQL locks it against another instance's
    /// takeover; SQLite's one writer needs no lock.
    static let held = Spelling(
        sqlite: """
            SELECT fingerprint, resource_id, status, coalesce(body, x''), claimed_until FROM idempotency_keys
            WHERE scope = ?1 AND idempotency_key = ?2
            """,
        postgres: """
            SELECT fingerprint, resource_id, status, coalesce(body, ''::bytea), claimed_until FROM idempotency_keys
            WHERE scope = $1 AND idempotency_key = $2 FOR UPDATE
            """)

    /// 1 the new lease end, 2 scope, 3 key.
    static let extendLease = Spelling("""
        UPDATE idempotency_keys SET claimed_until = $1 WHERE scope = $2 AND idempotency_key = $3
        """)

    /// 1 status, 2 body, 3 scope, 4 key, 5 the holder's resource id.
    static let answer = Spelling("""
        UPDATE idempotency_keys SET status = $1, body = $2 WHERE scope = $3 AND idempotency_key = $4 AND resource_id = $5
        """)

    /// An unanswered key: 1 scope, 2 key, 3 the holder's resource id.
    static let release = Spelling("""
        DELETE FROM idempotency_keys WHERE scope = $1 AND idempotency_key = $2 AND resource_id = $3 AND status IS NULL
        """)

    /// The oldest keys created before 1, at most 2 of them; one row each. PostgreSQL
    /// skips rows another instance's claim or prune holds.
    static let prune = Spelling(
        sqlite: """
            DELETE FROM idempotency_keys WHERE rowid IN (
                SELECT rowid FROM idempotency_keys WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)
            RETURNING 1
            """,
        postgres: """
            DELETE FROM idempotency_keys WHERE (scope, idempotency_key) IN (
                SELECT scope, idempotency_key FROM idempotency_keys WHERE created_at < $1
                ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING 1
            """)
}
