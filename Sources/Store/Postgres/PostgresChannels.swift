import PostgresNIO

// Broadcast channels and their sends on PostgreSQL: the same rows and answers as
// SQLite's (Channels.swift). Broadcasts are claimed as deliveries are, in one
// statement with `FOR UPDATE SKIP LOCKED`, so instances never hold one at once.

extension PostgresStore {
    public func channel(_ key: ChannelKey) async throws(StoreError) -> ChannelRow? {
        try await channels("read a channel", """
            \(unescaped: Self.channelSelectPostgres)
            WHERE app_type = \(key.appType) AND environment = \(key.environment)
              AND entity_type = \(key.entityType) AND entity_id = \(key.entityID)
            """).first
    }

    public func channel(_ key: ChannelKey, visibleTo userID: String, companyID: String?) async throws(StoreError) -> ChannelRow? {
        try await channels("read a channel", """
            \(unescaped: Self.channelSelectPostgres)
            WHERE app_type = \(key.appType) AND environment = \(key.environment)
              AND entity_type = \(key.entityType) AND entity_id = \(key.entityID)
              AND (is_public OR audience_company = \(companyID)::text
                   OR EXISTS (SELECT 1 FROM channel_users m WHERE m.channel = channels.id AND m.user_id = \(userID)))
            """).first
    }

    public func channels(appType: String, environment: String?, entityType: String?) async throws(StoreError) -> [ChannelRow] {
        try await channels("list channels", """
            \(unescaped: Self.channelSelectPostgres)
            WHERE app_type = \(appType) AND (\(environment)::text IS NULL OR environment = \(environment)::text)
              AND (\(entityType)::text IS NULL OR entity_type = \(entityType)::text)
            ORDER BY entity_type COLLATE "C", entity_id COLLATE "C", environment COLLATE "C"
            """)
    }

    /// Two statements in READ COMMITTED: an insert that meets another instance's
    /// (uncommitted) row for the key waits for it and does nothing, and the read that
    /// follows, with a snapshot of its own, sees the row that won.
    public func addChannel(_ channel: ChannelRow, audience: ChannelAudience?) async throws(StoreError) -> ChannelRow {
        let doing = "store a channel"
        let k = channel.key
        return try await transaction(doing) { db -> ChannelRow in
            try await db.run("""
                INSERT INTO channels (app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at)
                VALUES (\(k.appType), \(k.environment), \(k.entityType), \(k.entityID), \(channel.channelID),
                        \(Int64(channel.storagePolicy)), \(channel.createdAt))
                ON CONFLICT (app_type, environment, entity_type, entity_id) DO NOTHING
                """)
            if let audience { _ = try await Self.setChannelAudience(db, k, audience) }
            let rows = try await db.rows("""
                \(unescaped: Self.channelSelectPostgres)
                WHERE app_type = \(k.appType) AND environment = \(k.environment)
                  AND entity_type = \(k.entityType) AND entity_id = \(k.entityID)
                """)
            guard let row = rows.first else {
                // Removed by another instance between the two statements.
                throw StoreError("\(doing): the channel was removed while it was stored")
            }
            return try ChannelRow(postgres: row)
        }
    }

    public func setChannelAudience(_ key: ChannelKey, _ audience: ChannelAudience) async throws(StoreError) -> Bool {
        try await transaction("set a channel's audience") { db in try await Self.setChannelAudience(db, key, audience) }
    }

    /// The channel's row is locked by the first statement: two backends setting its
    /// audience at once end with one of the two lists, never a mix.
    static func setChannelAudience(_ db: PostgresConnection, _ key: ChannelKey, _ audience: ChannelAudience) async throws -> Bool {
        let updated = try await db.rows("""
            UPDATE channels SET is_public = \(audience.isPublic), audience_company = \(audience.companyID)::text
            WHERE app_type = \(key.appType) AND environment = \(key.environment)
              AND entity_type = \(key.entityType) AND entity_id = \(key.entityID)
            RETURNING id
            """)
        guard let id = try updated.first?.get(0, Int64.self) else { return false }
        try await db.run("DELETE FROM channel_users WHERE channel = \(id)")
        try await db.run("""
            INSERT INTO channel_users (channel, user_id) SELECT \(id), u FROM unnest(\(audience.userIDs)::text[]) AS u
            ON CONFLICT DO NOTHING
            """)
        return true
    }

    public func removeChannel(_ key: ChannelKey, channelID: String) async throws(StoreError) -> Bool {
        try await !rows("remove a channel", """
            DELETE FROM channels
            WHERE app_type = \(key.appType) AND environment = \(key.environment) AND entity_type = \(key.entityType)
              AND entity_id = \(key.entityID) AND channel_id = \(channelID)
            RETURNING id
            """).isEmpty
    }

    private func channels(_ doing: String, _ query: PostgresQuery) async throws(StoreError) -> [ChannelRow] {
        let found = try await rows(doing, query)
        do {
            return try found.map(ChannelRow.init(postgres:))
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    static let channelSelectPostgres = """
        SELECT app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at FROM channels
        """

    // MARK: Broadcasts

    public func enqueueBroadcast(_ b: NewBroadcast, now: Int64) async throws(StoreError) {
        let k = b.channel.key
        try await transaction("record a broadcast") { db in
            try await db.run("""
                INSERT INTO broadcasts (id, app_type, environment, entity_type, entity_id, channel_id, payload,
                                        priority, expiration, created_at, available_at)
                VALUES (\(b.id), \(k.appType), \(k.environment), \(k.entityType), \(k.entityID), \(b.channel.channelID),
                        \(ByteBuffer(bytes: b.payload)), \(b.priority.map(Int64.init))::integer, \(b.expiration),
                        \(now), \(now))
                """)
            // Idle workers of every instance wake for it, as for deliveries (at commit).
            try await db.run("SELECT pg_notify(\(Self.workChannel), '')")
        }
    }

    /// One statement, as `claim`: the oldest due broadcasts whose lease is free or
    /// expired, locked (skipping those another claim holds locked), leased.
    public func claimBroadcasts(worker: String, limit: Int, leaseMillis: Int64,
                                now: Int64) async throws(StoreError) -> [ClaimedBroadcast] {
        let doing = "claim broadcasts"
        guard limit > 0 else { return [] }
        let found = try await rows(doing, """
            WITH picked AS (
                SELECT id FROM broadcasts
                WHERE state = 'pending' AND available_at <= \(now) AND (lease_until IS NULL OR lease_until <= \(now))
                ORDER BY available_at, created_at
                LIMIT \(Int64(limit))
                FOR UPDATE SKIP LOCKED
            ), leased AS (
                UPDATE broadcasts b SET lease_until = \(now + leaseMillis), claimed_by = \(worker)
                FROM picked WHERE b.id = picked.id
                -- The attempts as they were before this claim (the lease changes no count).
                RETURNING b.id, b.app_type, b.environment, b.entity_type, b.entity_id, b.channel_id, b.payload,
                          b.priority, b.expiration, b.attempts, b.created_at, b.available_at
            )
            SELECT b.id, b.app_type, b.environment, b.entity_type, b.entity_id, b.channel_id, b.payload,
                   b.priority, b.expiration, b.attempts, coalesce(c.storage_policy, 0), b.created_at
            FROM leased b
            LEFT JOIN channels c ON c.app_type = b.app_type AND c.environment = b.environment
                                AND c.entity_type = b.entity_type AND c.entity_id = b.entity_id
            ORDER BY b.available_at, b.created_at
            """)
        do {
            return try found.map { row in
                let key = ChannelKey(appType: try row.get(1), environment: try row.get(2), entityType: try row.get(3),
                                     entityID: try row.get(4))
                let payload = try row.get(6, ByteBuffer.self)
                return ClaimedBroadcast(
                    broadcast: NewBroadcast(
                        id: try row.get(0),
                        channel: ChannelRow(key: key, channelID: try row.get(5), storagePolicy: try row.get(10),
                                            createdAt: try row.get(11)),
                        payload: Array(payload.readableBytesView), priority: try row.get(7), expiration: try row.get(8)),
                    attempts: try row.get(9))
            }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    /// One final entry: only the worker holding the broadcast writes it, once.
    public func finishBroadcast(worker: String, _ o: BroadcastOutcome, now: Int64) async throws(StoreError) -> Bool {
        let webhooks = webhookRouting.current
        if !webhooks.urls(for: .broadcastCompleted).isEmpty {
            return try await finishBroadcastRecordingEvent(worker: worker, o, routes: webhooks, now: now)
        }
        return try await rows("finish a broadcast", """
            UPDATE broadcasts SET state = \(o.delivered ? "delivered" : "failed"), status = \(Int64(o.status)),
                                  reason = \(o.reason)::text, request_id = \(o.requestID)::text,
                                  unique_id = \(o.uniqueID)::text, attempts = \(Int64(o.attempts)),
                                  finished_at = \(now), lease_until = NULL, claimed_by = NULL
            WHERE id = \(o.id) AND state = 'pending' AND claimed_by = \(worker)
            RETURNING id
            """).count == 1
    }

    public func renewBroadcasts(worker: String, ids: [String], leaseMillis: Int64, now: Int64) async throws(StoreError) {
        guard !ids.isEmpty else { return }
        _ = try await rows("renew broadcast leases", """
            UPDATE broadcasts SET lease_until = \(now + leaseMillis)
            WHERE claimed_by = \(worker) AND state = 'pending' AND id = ANY(\(ids)::text[])
            """)
    }

    /// No final answer: pending again from `availableAt`, the attempt counted.
    public func releaseBroadcast(worker: String, id: String, availableAt: Int64, now: Int64) async throws(StoreError) {
        _ = try await rows("release a broadcast", """
            UPDATE broadcasts SET available_at = \(availableAt), lease_until = NULL, claimed_by = NULL,
                                  attempts = attempts + 1
            WHERE id = \(id) AND state = 'pending' AND claimed_by = \(worker)
            """)
    }

    public func broadcast(id: String) async throws(StoreError) -> BroadcastView? {
        let doing = "read a broadcast"
        let found = try await rows(doing, """
            SELECT id, app_type, environment, entity_type, entity_id, channel_id, state, status, reason,
                   request_id, unique_id, attempts, created_at, finished_at
            FROM broadcasts WHERE id = \(id)
            """)
        do {
            return try found.first.map { row in
                BroadcastView(id: try row.get(0),
                              key: ChannelKey(appType: try row.get(1), environment: try row.get(2),
                                              entityType: try row.get(3), entityID: try row.get(4)),
                              channelID: try row.get(5), state: try row.get(6), status: try row.get(7),
                              reason: try row.get(8), requestID: try row.get(9), uniqueID: try row.get(10),
                              attempts: try row.get(11), createdAt: try row.get(12), finishedAt: try row.get(13))
            }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    public func pendingBroadcasts() async throws(StoreError) -> Int {
        do {
            return try await rows("count broadcasts", "SELECT count(*) FROM broadcasts WHERE state = 'pending'")[0]
                .get(0, Int.self)
        } catch {
            throw StoreError(postgres: error, "count broadcasts", configuration)
        }
    }
}

extension ChannelRow {
    init(postgres row: PostgresRandomAccessRow) throws {
        self.init(key: ChannelKey(appType: try row.get(0), environment: try row.get(1), entityType: try row.get(2),
                                  entityID: try row.get(3)),
                  channelID: try row.get(4), storagePolicy: try row.get(5), createdAt: try row.get(6))
    }
}
