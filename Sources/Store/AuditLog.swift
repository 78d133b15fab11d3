import GRDB

extension SQLiteStore: AuditLogStore {
    public func appendAudit(_ e: AuditEntry) async throws(StoreError) {
        try await write("record an audit entry") { db in
            try db.execute(sql: """
                INSERT INTO audit_log (at, actor, method, path, app_type, target, status, remote_address)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [e.at, e.actor, e.method, e.path, e.appType, e.target, e.status, e.remoteAddress])
        }
    }

    public func auditEntries(limit: Int, before: Int64?) async throws(StoreError) -> Page<AuditEntry, Int64> {
        try await read("read the audit log") { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT \(AuditEntry.columns) FROM audit_log WHERE id < ? ORDER BY id DESC LIMIT ?
                """, arguments: [before ?? Int64.max, limit + 1]).map(AuditEntry.init)
            return Page(rows: rows, limit: limit) { rows[$0].id }
        }
    }

    public func pruneAudit(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune the audit log") { db in
            try db.execute(sql: """
                DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE at < ? ORDER BY id LIMIT ?)
                """, arguments: [cutoff, limit])
            return db.changesCount
        }
    }
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
