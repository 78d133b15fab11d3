/// The audit log: who created, cancelled or changed what, when and from where.
/// Appended once per call, read newest first, and pruned with the delivery log's
/// retention. It never holds a secret or a payload: a key's name, a method and a
/// path, the app, the id of what was made, the answer's status, the peer address.
public protocol AuditLogStore {
    /// Records one call; committed when this returns.
    func appendAudit(_ entry: AuditEntry) async throws(StoreError)
    /// Newest first, at most `limit`, those older than the cursor `before` (the
    /// previous page's `next`).
    func auditEntries(limit: Int, before: Int64?) async throws(StoreError) -> Page<AuditEntry, Int64>
    /// Retention: deletes up to `limit` entries recorded before `cutoff`; how many went.
    func pruneAudit(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}

public struct AuditEntry: Sendable, Hashable {
    /// Given by the store when appended; 0 before.
    public var id: Int64
    public var at: Int64
    /// The API key's name, or `user:` and the app user's id.
    public var actor: String
    public var method: String
    /// The request's path, without its query.
    public var path: String
    public var appType: String?
    /// The id of what the call created (a notification, a schedule, a broadcast).
    public var target: String?
    public var status: Int
    public var remoteAddress: String?

    public init(id: Int64 = 0, at: Int64, actor: String, method: String, path: String, appType: String?,
                target: String?, status: Int, remoteAddress: String?) {
        self.id = id
        self.at = at
        self.actor = actor
        self.method = method
        self.path = path
        self.appType = appType
        self.target = target
        self.status = status
        self.remoteAddress = remoteAddress
    }
}
