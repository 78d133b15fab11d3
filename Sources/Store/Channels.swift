/// `ChannelStore`, once for both engines: broadcast channels and the broadcasts
/// sent on them (statements in `ChannelStatements`).
extension StoreEngine {
    public func channel(_ key: ChannelKey) async throws(StoreError) -> ChannelRow? {
        try await reading("read a channel") { c in
            try await c.row(ChannelStatements.channel, key.arguments).map(ChannelRow.init)
        }
    }

    public func channel(_ key: ChannelKey, visibleTo userID: String, companyID: String?) async throws(StoreError) -> ChannelRow? {
        try await reading("read a channel") { c in
            try await c.row(ChannelStatements.visibleChannel, key.arguments + [companyID, userID]).map(ChannelRow.init)
        }
    }

    public func channels(appType: String, environment: String?, entityType: String?) async throws(StoreError) -> [ChannelRow] {
        try await reading("list channels") { c in
            try await c.rows(ChannelStatements.channels, [appType, environment, entityType]).map(ChannelRow.init)
        }
    }

    /// Two statements: on PostgreSQL (READ COMMITTED) an insert that meets another
    /// instance's uncommitted row for the key waits for it and does nothing, and the
    /// read that follows, with a snapshot of its own, sees the row that won.
    public func addChannel(_ channel: ChannelRow, audience: ChannelAudience?) async throws(StoreError) -> ChannelRow {
        let doing = "store a channel"
        return try await writing(doing) { c in
            let k = channel.key
            try await c.run(ChannelStatements.add, k.arguments + [channel.channelID, channel.storagePolicy,
                                                                  channel.createdAt])
            if let audience { _ = try await Self.setChannelAudience(c, k, audience) }
            guard let row = try await c.row(ChannelStatements.channel, k.arguments) else {
                // Removed by another instance between the two statements.
                throw StoreError("\(doing): the channel was removed while it was stored")
            }
            return try ChannelRow(row)
        }
    }

    public func setChannelAudience(_ key: ChannelKey, _ audience: ChannelAudience) async throws(StoreError) -> Bool {
        try await writing("set a channel's audience") { c in try await Self.setChannelAudience(c, key, audience) }
    }

    /// The channel's row is locked by the first statement (on PostgreSQL): two
    /// backends setting its audience at once end with one of the two lists, never a mix.
    static func setChannelAudience<C: StoreConnection>(_ c: C, _ key: ChannelKey,
                                                       _ audience: ChannelAudience) async throws -> Bool {
        guard let id = try await c.int64(ChannelStatements.setAudience,
                                         [audience.isPublic, audience.companyID] + key.arguments) else { return false }
        try await c.run(ChannelStatements.clearUsers, [id])
        try await c.run(ChannelStatements.addUsers, [id, StoreValue.list(audience.userIDs)])
        return true
    }

    public func removeChannel(_ key: ChannelKey, channelID: String) async throws(StoreError) -> Bool {
        try await writing("remove a channel") { c in
            try await !c.rows(ChannelStatements.remove, key.arguments + [channelID]).isEmpty
        }
    }

    // MARK: Broadcasts

    public func enqueueBroadcast(_ b: NewBroadcast, now: Int64) async throws(StoreError) {
        try await writing("record a broadcast") { c in
            try await c.run(ChannelStatements.enqueue, [b.id] + b.channel.key.arguments + [
                b.channel.channelID, StoreValue.blob(b.payload), b.priority, b.expiration, now])
            // Idle workers of every instance wake for it, as for deliveries (at commit).
            try await c.wakeWorkers()
        }
    }

    /// The oldest due broadcasts whose lease is free or expired, leased to `worker`.
    public func claimBroadcasts(worker: String, limit: Int, leaseMillis: Int64,
                                now: Int64) async throws(StoreError) -> [ClaimedBroadcast] {
        guard limit > 0 else { return [] }
        return try await writing("claim broadcasts") { c in
            switch c.engine {
            case .postgres:
                // Several instances claim at once: one statement picks, locks (passing
                // by those another claim holds) and leases, as deliveries are claimed.
                return try await c.rows(ChannelStatements.claimLocked, [now, limit, now + leaseMillis, worker])
                    .map(ClaimedBroadcast.init)
            case .sqlite:
                // One writer: what is due is read, then leased.
                let claimed = try await c.rows(ChannelStatements.due, [now, limit]).map(ClaimedBroadcast.init)
                if !claimed.isEmpty {
                    try await c.run(ChannelStatements.lease, [now + leaseMillis, worker,
                                                              StoreValue.list(claimed.map(\.broadcast.id))])
                }
                return claimed
            }
        }
    }

    /// One final entry: only the worker holding the broadcast writes it, once; with
    /// its `broadcast.completed` events when receivers want them.
    public func finishBroadcast(worker: String, _ o: BroadcastOutcome, now: Int64) async throws(StoreError) -> Bool {
        let webhooks = webhookRouting.current
        return try await writing("finish a broadcast") { c in
            let finished = try await c.rows(ChannelStatements.finish, [
                o.delivered ? "delivered" : "failed", o.status, o.reason, o.requestID, o.uniqueID, o.attempts, now,
                o.id, worker]).count == 1
            if finished { try await Self.recordBroadcast(c, webhooks, id: o.id, now: now) }
            return finished
        }
    }

    public func renewBroadcasts(worker: String, ids: [String], leaseMillis: Int64, now: Int64) async throws(StoreError) {
        guard !ids.isEmpty else { return }
        try await writing("renew broadcast leases") { c in
            try await c.run(ChannelStatements.renew, [now + leaseMillis, worker, StoreValue.list(ids)])
        }
    }

    /// No final answer (APNs unreachable, or busy through every retry): pending
    /// again from `availableAt`, the attempt counted.
    public func releaseBroadcast(worker: String, id: String, availableAt: Int64, now: Int64) async throws(StoreError) {
        try await writing("release a broadcast") { c in
            try await c.run(ChannelStatements.release, [availableAt, id, worker])
        }
    }

    public func broadcast(id: String) async throws(StoreError) -> BroadcastView? {
        try await reading("read a broadcast") { c in
            try await c.row(ChannelStatements.broadcast, [id]).map(BroadcastView.init)
        }
    }

    public func pendingBroadcasts() async throws(StoreError) -> Int {
        try await reading("count broadcasts") { c in
            Int(try await c.int64(ChannelStatements.pending, []) ?? 0)
        }
    }
}

extension ChannelKey {
    /// The key as a statement's four arguments: app, environment, entity type, entity.
    var arguments: [any StoreBindable] { [appType, environment, entityType, entityID] }
}

extension ChannelRow {
    /// From `ChannelStatements.channelColumns`.
    init<R: StoreRow>(_ row: R) throws {
        self.init(key: ChannelKey(appType: try row.string(0), environment: try row.string(1),
                                  entityType: try row.string(2), entityID: try row.string(3)),
                  channelID: try row.string(4), storagePolicy: try row.int(5), createdAt: try row.int64(6))
    }
}

extension ClaimedBroadcast {
    /// From `ChannelStatements.claim`'s columns.
    init<R: StoreRow>(_ row: R) throws {
        let key = ChannelKey(appType: try row.string(1), environment: try row.string(2), entityType: try row.string(3),
                             entityID: try row.string(4))
        self.init(broadcast: NewBroadcast(id: try row.string(0),
                                          channel: ChannelRow(key: key, channelID: try row.string(5),
                                                              storagePolicy: try row.int(10),
                                                              createdAt: try row.int64(11)),
                                          payload: try row.byteArray(6), priority: try row.optionalInt(7),
                                          expiration: try row.int64(8)),
                  attempts: try row.int(9))
    }
}

extension BroadcastView {
    /// From `ChannelStatements.broadcast`'s columns.
    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.string(0),
                  key: ChannelKey(appType: try row.string(1), environment: try row.string(2),
                                  entityType: try row.string(3), entityID: try row.string(4)),
                  channelID: try row.string(5), state: try row.string(6), status: try row.optionalInt(7),
                  reason: try row.optionalString(8), requestID: try row.optionalString(9),
                  uniqueID: try row.optionalString(10), attempts: try row.int(11), createdAt: try row.int64(12),
                  finishedAt: try row.optionalInt64(13))
    }
}
