import Foundation
import GRDB

// Broadcast channels and their sends on SQLite (the contract: `ChannelStore`).

extension SQLiteStore {
    public func channel(_ key: ChannelKey) async throws(StoreError) -> ChannelRow? {
        try await read("read a channel") { db in
            try Row.fetchOne(db, sql: Self.channelSelect + """
                WHERE app_type = ? AND environment = ? AND entity_type = ? AND entity_id = ?
                """, arguments: [key.appType, key.environment, key.entityType, key.entityID]).map(ChannelRow.init(row:))
        }
    }

    public func channel(_ key: ChannelKey, visibleTo userID: String, companyID: String?) async throws(StoreError) -> ChannelRow? {
        try await read("read a channel") { db in
            try Row.fetchOne(db, sql: Self.channelSelect + """
                WHERE app_type = :app AND environment = :environment AND entity_type = :type AND entity_id = :entity
                  AND (is_public = 1 OR audience_company = :company
                       OR EXISTS (SELECT 1 FROM channel_users m WHERE m.channel = channels.id AND m.user_id = :user))
                """, arguments: ["app": key.appType, "environment": key.environment, "type": key.entityType,
                                 "entity": key.entityID, "company": companyID, "user": userID]).map(ChannelRow.init(row:))
        }
    }

    public func channels(appType: String, environment: String?, entityType: String?) async throws(StoreError) -> [ChannelRow] {
        try await read("list channels") { db in
            try Row.fetchAll(db, sql: Self.channelSelect + """
                WHERE app_type = ? AND coalesce(environment = ?, 1) AND coalesce(entity_type = ?, 1)
                ORDER BY entity_type, entity_id, environment
                """, arguments: [appType, environment, entityType]).map(ChannelRow.init(row:))
        }
    }

    public func addChannel(_ channel: ChannelRow, audience: ChannelAudience?) async throws(StoreError) -> ChannelRow {
        try await write("store a channel") { db in
            let k = channel.key
            try db.execute(sql: """
                INSERT INTO channels (app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (app_type, environment, entity_type, entity_id) DO NOTHING
                """, arguments: [k.appType, k.environment, k.entityType, k.entityID, channel.channelID,
                                 channel.storagePolicy, channel.createdAt])
            if let audience { _ = try Self.setChannelAudience(db, k, audience) }
            return try Row.fetchOne(db, sql: Self.channelSelect + """
                WHERE app_type = ? AND environment = ? AND entity_type = ? AND entity_id = ?
                """, arguments: [k.appType, k.environment, k.entityType, k.entityID]).map(ChannelRow.init(row:))!
        }
    }

    public func setChannelAudience(_ key: ChannelKey, _ audience: ChannelAudience) async throws(StoreError) -> Bool {
        try await write("set a channel's audience") { db in try Self.setChannelAudience(db, key, audience) }
    }

    static func setChannelAudience(_ db: Database, _ key: ChannelKey, _ audience: ChannelAudience) throws -> Bool {
        guard let id = try Int64.fetchOne(db, sql: """
            SELECT id FROM channels WHERE app_type = ? AND environment = ? AND entity_type = ? AND entity_id = ?
            """, arguments: [key.appType, key.environment, key.entityType, key.entityID]) else { return false }
        try db.execute(sql: "UPDATE channels SET is_public = ?, audience_company = ? WHERE id = ?",
                       arguments: [audience.isPublic, audience.companyID, id])
        try db.execute(sql: "DELETE FROM channel_users WHERE channel = ?", arguments: [id])
        try db.execute(sql: """
            INSERT OR IGNORE INTO channel_users (channel, user_id) SELECT ?, value FROM json_each(?)
            """, arguments: [id, jsonArray(audience.userIDs)])
        return true
    }

    public func removeChannel(_ key: ChannelKey, channelID: String) async throws(StoreError) -> Bool {
        try await write("remove a channel") { db in
            try db.execute(sql: """
                DELETE FROM channels
                WHERE app_type = ? AND environment = ? AND entity_type = ? AND entity_id = ? AND channel_id = ?
                """, arguments: [key.appType, key.environment, key.entityType, key.entityID, channelID])
            return db.changesCount > 0
        }
    }

    // MARK: Broadcasts

    public func enqueueBroadcast(_ b: NewBroadcast, now: Int64) async throws(StoreError) {
        try await write("record a broadcast") { db in
            let k = b.channel.key
            try db.execute(sql: """
                INSERT INTO broadcasts (id, app_type, environment, entity_type, entity_id, channel_id, payload,
                                        priority, expiration, created_at, available_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [b.id, k.appType, k.environment, k.entityType, k.entityID, b.channel.channelID,
                                 Data(b.payload), b.priority, b.expiration, now, now])
        }
    }

    public func claimBroadcasts(worker: String, limit: Int, leaseMillis: Int64,
                                now: Int64) async throws(StoreError) -> [ClaimedBroadcast] {
        try await write("claim broadcasts") { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT b.id, b.app_type, b.environment, b.entity_type, b.entity_id, b.channel_id, b.payload,
                       b.priority, b.expiration, b.attempts, coalesce(c.storage_policy, 0), b.created_at
                FROM broadcasts b
                LEFT JOIN channels c ON c.app_type = b.app_type AND c.environment = b.environment
                                    AND c.entity_type = b.entity_type AND c.entity_id = b.entity_id
                WHERE b.state = 'pending' AND b.available_at <= :now AND (b.lease_until IS NULL OR b.lease_until <= :now)
                ORDER BY b.available_at, b.created_at
                LIMIT :limit
                """, arguments: ["now": now, "limit": limit])
            let claimed = rows.map { row in
                let key = ChannelKey(appType: row[1], environment: row[2], entityType: row[3], entityID: row[4])
                let payload: Data = row[6]
                return ClaimedBroadcast(
                    broadcast: NewBroadcast(
                        id: row[0], channel: ChannelRow(key: key, channelID: row[5], storagePolicy: row[10], createdAt: row[11]),
                        payload: Array(payload), priority: row[7], expiration: row[8]),
                    attempts: row[9])
            }
            if !claimed.isEmpty {
                try db.execute(sql: """
                    UPDATE broadcasts SET lease_until = ?, claimed_by = ?
                    WHERE id IN (SELECT value FROM json_each(?))
                    """, arguments: [now + leaseMillis, worker, jsonArray(claimed.map(\.broadcast.id))])
            }
            return claimed
        }
    }

    /// One final entry: only the worker holding the broadcast writes it, once.
    public func finishBroadcast(worker: String, _ o: BroadcastOutcome, now: Int64) async throws(StoreError) -> Bool {
        let webhooks = webhookRouting.current
        return try await write("finish a broadcast") { db in
            try db.execute(sql: """
                UPDATE broadcasts SET state = ?, status = ?, reason = ?, request_id = ?, unique_id = ?, attempts = ?,
                                      finished_at = ?, lease_until = NULL, claimed_by = NULL
                WHERE id = ? AND state = 'pending' AND claimed_by = ?
                """, arguments: [o.delivered ? "delivered" : "failed", o.status, o.reason, o.requestID, o.uniqueID,
                                 o.attempts, now, o.id, worker])
            guard db.changesCount == 1 else { return false }
            try Self.recordBroadcast(db, webhooks, id: o.id, now: now)
            return true
        }
    }

    public func renewBroadcasts(worker: String, ids: [String], leaseMillis: Int64, now: Int64) async throws(StoreError) {
        guard !ids.isEmpty else { return }
        try await write("renew broadcast leases") { db in
            try db.execute(sql: """
                UPDATE broadcasts SET lease_until = ?
                WHERE claimed_by = ? AND state = 'pending' AND id IN (SELECT value FROM json_each(?))
                """, arguments: [now + leaseMillis, worker, jsonArray(ids)])
        }
    }

    /// No final answer (APNs unreachable, or busy through every retry): pending
    /// again from `availableAt`, the attempt counted.
    public func releaseBroadcast(worker: String, id: String, availableAt: Int64, now: Int64) async throws(StoreError) {
        try await write("release a broadcast") { db in
            try db.execute(sql: """
                UPDATE broadcasts SET available_at = ?, lease_until = NULL, claimed_by = NULL, attempts = attempts + 1
                WHERE id = ? AND state = 'pending' AND claimed_by = ?
                """, arguments: [availableAt, id, worker])
        }
    }

    public func broadcast(id: String) async throws(StoreError) -> BroadcastView? {
        try await read("read a broadcast") { db in
            try Row.fetchOne(db, sql: """
                SELECT id, app_type, environment, entity_type, entity_id, channel_id, state, status, reason,
                       request_id, unique_id, attempts, created_at, finished_at
                FROM broadcasts WHERE id = ?
                """, arguments: [id]).map { row in
                BroadcastView(id: row[0], key: ChannelKey(appType: row[1], environment: row[2], entityType: row[3],
                                                          entityID: row[4]),
                              channelID: row[5], state: row[6], status: row[7], reason: row[8], requestID: row[9],
                              uniqueID: row[10], attempts: row[11], createdAt: row[12], finishedAt: row[13])
            }
        }
    }

    public func pendingBroadcasts() async throws(StoreError) -> Int {
        try await read("count broadcasts") { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM broadcasts WHERE state = 'pending'") ?? 0
        }
    }

    static let channelSelect = """
        SELECT app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at FROM channels

        """
}

extension ChannelRow {
    init(row: Row) {
        self.init(key: ChannelKey(appType: row[0], environment: row[1], entityType: row[2], entityID: row[3]),
                  channelID: row[4], storagePolicy: row[5], createdAt: row[6])
    }
}
