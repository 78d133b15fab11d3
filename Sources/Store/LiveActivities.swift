import Foundation
import GRDB

// Live Activity tokens on SQLite (the contract and how they are kept: `LiveActivityStore`).

extension SQLiteStore {
    public func registerLiveActivity(_ r: LiveActivityRegistration, maxActive: Int,
                                     now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await writeUnlessRefused("register a Live Activity token") { db in
            if let reason = try Self.registerLiveActivity(db, r, maxActive: maxActive, now: now) {
                throw RegistrationRefusal(reason)
            }
        }
    }

    static func registerLiveActivity(_ db: Database, _ r: LiveActivityRegistration, maxActive: Int,
                                     now: Int64) throws -> RegistrationRefusal.Reason? {
        let token = r.token.lowercased()
        let existing = try Row.fetchOne(db, sql: "SELECT id, user_id, platform FROM devices WHERE app_type = ? AND token = ?",
                                        arguments: [r.appType, token])
        if let existing, existing["platform"] as String != "liveactivity" { return .otherKind }
        let (kind, activity): (String, String?) = switch r.kind {
        case .update(let activityID): ("update", activityID)
        case .start: ("start", nil)
        }
        if let activity {
            // The first registration of an activity makes its user the owner.
            try db.execute(sql: """
                INSERT INTO live_activities (app_type, activity_id, user_id, created_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (app_type, activity_id) DO NOTHING
                """, arguments: [r.appType, activity, r.userID, now])
            let owner = try String.fetchOne(db, sql: "SELECT user_id FROM live_activities WHERE app_type = ? AND activity_id = ?",
                                            arguments: [r.appType, activity])
            guard owner == r.userID else { return .activityOfAnotherUser }
        }
        let id = try Int64.fetchOne(db, sql: """
            INSERT INTO devices (user_id, app_type, token, platform, environment, is_active,
                                 registered_at, created_at, updated_at)
            VALUES (:user, :app, :token, 'liveactivity', :environment, 1, :now, :now, :now)
            ON CONFLICT (app_type, token) DO UPDATE SET
                created_at = CASE WHEN user_id = excluded.user_id THEN created_at ELSE excluded.created_at END,
                user_id = excluded.user_id,
                company_id = NULL,
                environment = excluded.environment,
                is_active = 1,
                deactivated_reason = NULL,
                deactivated_at = NULL,
                registered_at = excluded.registered_at,
                updated_at = excluded.updated_at
            RETURNING id
            """, arguments: ["user": r.userID, "app": r.appType, "token": token, "environment": r.environment,
                             "now": now])!
        if let existing, existing["user_id"] as String != r.userID {
            try forgetUse(db, deviceID: id)
        }
        try db.execute(sql: """
            INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type) VALUES (?, ?, ?, ?)
            ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, activity_id = excluded.activity_id,
                                                  attributes_type = excluded.attributes_type
            """, arguments: [id, kind, activity, r.attributesType])
        try retireOldest(db, keeping: maxActive, of: .liveActivity, userID: r.userID, appType: r.appType, now: now)
        return nil
    }

    public func unregisterLiveActivity(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await write("unregister a Live Activity token") { db in
            try db.execute(sql: """
                UPDATE devices SET is_active = 0, deactivated_reason = 'unregistered', deactivated_at = ?, updated_at = ?
                WHERE user_id = ? AND token = ? AND platform = 'liveactivity' AND is_active = 1
                """, arguments: [now, now, userID, token.lowercased()])
            return db.changesCount > 0
        }
    }

    public func liveActivityTokens(userID: String) async throws(StoreError) -> [LiveActivityToken] {
        try await read("list Live Activity tokens") { db in
            try Row.fetchAll(db, sql: Self.liveActivitySelect + """
                WHERE d.user_id = ? AND d.is_active = 1 AND d.platform = 'liveactivity'
                ORDER BY d.registered_at DESC, d.id DESC
                """, arguments: [userID]).map(LiveActivityToken.init(row:))
        }
    }

    public func liveActivityTokens(appType: String, _ target: LiveActivityTarget) async throws(StoreError) -> [LiveActivityToken] {
        try await read("find Live Activity tokens") { db in
            let active = "d.app_type = ? AND d.is_active = 1 AND d.platform = 'liveactivity'"
            let order = " ORDER BY d.user_id, d.registered_at DESC, d.id DESC"
            let rows: [Row] = switch target {
            case .startTokens(let users, let attributesType):
                try Row.fetchAll(db, sql: Self.liveActivitySelect + """
                    WHERE \(active) AND l.kind = 'start' AND l.attributes_type = ?
                      AND d.user_id IN (SELECT value FROM json_each(?))
                    """ + order, arguments: [appType, attributesType, jsonArray(users)])
            case .updateTokens(let users, let attributesType):
                try Row.fetchAll(db, sql: Self.liveActivitySelect + """
                    WHERE \(active) AND l.kind = 'update' AND coalesce(l.attributes_type = ?, 1)
                      AND d.user_id IN (SELECT value FROM json_each(?))
                    """ + order, arguments: [appType, attributesType, jsonArray(users)])
            case .activity(let activityID):
                // Its owner's tokens only: another user's token under the same id (one
                // registered before owners were kept) reaches no one.
                try Row.fetchAll(db, sql: Self.liveActivitySelect + """
                    WHERE \(active) AND l.kind = 'update' AND l.activity_id = ?
                      AND d.user_id = (SELECT user_id FROM live_activities WHERE app_type = d.app_type AND activity_id = ?)
                    """ + order, arguments: [appType, activityID, activityID])
            }
            return rows.map(LiveActivityToken.init(row:))
        }
    }

    static let liveActivitySelect = """
        SELECT d.id, d.user_id, d.token, d.app_type, l.kind, l.activity_id, l.attributes_type, d.environment,
               u.last_used_at, d.created_at
        FROM devices d JOIN live_activity_tokens l ON l.device_id = d.id
        LEFT JOIN device_use u ON u.device_id = d.id

        """
}

extension LiveActivityToken {
    init(row: Row) {
        let kind: String = row[4]
        let activity: String? = row[5]
        self.init(id: row[0], userID: row[1], token: row[2], appType: row[3],
                  kind: kind == "update" ? .update(activityID: activity ?? "") : .start,
                  attributesType: row[6], environment: row[7], lastUsedAt: row[8], createdAt: row[9])
    }
}
