import PostgresNIO

extension PostgresStore: AuditLogStore {
    public func appendAudit(_ e: AuditEntry) async throws(StoreError) {
        _ = try await rows("record an audit entry", """
            INSERT INTO audit_log (at, actor, method, path, app_type, target, status, remote_address)
            VALUES (\(e.at), \(e.actor), \(e.method), \(e.path), \(e.appType), \(e.target), \(e.status), \(e.remoteAddress))
            """)
    }

    public func auditEntries(limit: Int, before: Int64?) async throws(StoreError) -> Page<AuditEntry, Int64> {
        let doing = "read the audit log"
        let found = try await rows(doing, """
            SELECT \(unescaped: AuditEntry.columns) FROM audit_log WHERE id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(limit + 1)
            """)
        do {
            let items = try found.map(AuditEntry.init)
            return Page(rows: items, limit: limit) { items[$0].id }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    public func pruneAudit(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await transaction("prune the audit log") { db in
            try await db.rows("""
            WITH gone AS (
                DELETE FROM audit_log WHERE id IN (
                    SELECT id FROM audit_log WHERE at < \(cutoff) ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING 1)
            SELECT count(*) FROM gone
            """)[0].get(0, Int.self)
        }
    }
}
