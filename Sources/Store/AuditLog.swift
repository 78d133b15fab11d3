/// `AuditLogStore`, once for both engines.
extension StoreEngine {
    public func appendAudit(_ e: AuditEntry) async throws(StoreError) {
        try await writing("record an audit entry") { c in
            try await c.run(AuditStatements.append, [e.at, e.actor, e.method, e.path, e.appType, e.target, e.status,
                                                      e.remoteAddress])
        }
    }

    public func auditEntries(limit: Int, before: Int64?) async throws(StoreError) -> Page<AuditEntry, Int64> {
        try await reading("read the audit log") { c in
            let rows = try await c.rows(AuditStatements.page, [before ?? Int64.max, limit + 1]).map(AuditEntry.init)
            return Page(rows: rows, limit: limit) { rows[$0].id }
        }
    }

    public func pruneAudit(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune the audit log") { c in
            try await c.rows(AuditStatements.prune, [cutoff, limit]).count
        }
    }
}

enum AuditStatements {
    /// 1 at, 2 actor, 3 method, 4 path, 5 app, 6 target, 7 status, 8 remote address.
    static let append = Spelling("""
        INSERT INTO audit_log (at, actor, method, path, app_type, target, status, remote_address)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
        """)

    /// Newest first, before id 1; 2 how many.
    static let page = Spelling("""
        SELECT \(AuditEntry.columns) FROM audit_log WHERE id < $1 ORDER BY id DESC LIMIT $2
        """)

    /// The oldest entries before 1, at most 2 of them; one row each. PostgreSQL skips
    /// rows another instance's prune holds.
    static let prune = Spelling(
        sqlite: """
            DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < ?1 ORDER BY id LIMIT ?2)
            RETURNING 1
            """,
        postgres: """
            DELETE FROM audit_log WHERE id IN (
                SELECT id FROM audit_log WHERE at < $1 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
            RETURNING 1
            """)
}

extension AuditEntry {
    /// In this order on both engines, read by `init(_:)`.
    static let columns = "id, at, actor, method, path, app_type, target, status, remote_address"

    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.int64(0), at: try row.int64(1), actor: try row.string(2), method: try row.string(3),
                  path: try row.string(4), appType: try row.optionalString(5), target: try row.optionalString(6),
                  status: try row.int(7), remoteAddress: try row.optionalString(8))
    }
}
