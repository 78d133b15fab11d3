import Foundation
import GRDB

// Live Activity push tokens. Each is a `devices` row with platform 'liveactivity'
// (never listed with the device tokens, never in a fan-out: those read platform
// 'ios'), plus a `live_activity_tokens` row saying which kind it is. Sharing the
// devices table gives these tokens the outbox's claim check, the 410 rules and the
// cross-environment retry unchanged.

/// Where a Live Activity push token reaches.
public enum LiveActivityKind: Sendable, Hashable {
    /// One running activity's update token (updates and the end).
    case update(activityID: String)
    /// The app's push-to-start token for one `ActivityAttributes` type.
    case start
}

public struct LiveActivityRegistration: Sendable, Hashable {
    public var userID: String
    /// Lower-case hex.
    public var token: String
    public var appType: String
    public var kind: LiveActivityKind
    public var attributesType: String
    /// "sandbox" or "production".
    public var environment: String

    public init(userID: String, token: String, appType: String, kind: LiveActivityKind, attributesType: String,
                environment: String = "production") {
        self.userID = userID
        self.token = token
        self.appType = appType
        self.kind = kind
        self.attributesType = attributesType
        self.environment = environment
    }
}

/// A Live Activity token as the app lists it, or as a send targets it.
public struct LiveActivityToken: Sendable, Hashable {
    /// The `devices` row: a delivery's `deviceID`.
    public var id: Int64
    public var userID: String
    public var token: String
    public var appType: String
    public var kind: LiveActivityKind
    public var attributesType: String
    public var environment: String
    public var lastUsedAt: Int64?
    public var createdAt: Int64

    public init(id: Int64, userID: String, token: String, appType: String, kind: LiveActivityKind,
                attributesType: String, environment: String, lastUsedAt: Int64?, createdAt: Int64) {
        self.id = id
        self.userID = userID
        self.token = token
        self.appType = appType
        self.kind = kind
        self.attributesType = attributesType
        self.environment = environment
        self.lastUsedAt = lastUsedAt
        self.createdAt = createdAt
    }
}

/// Which active tokens of an app a Live Activity send goes to.
public enum LiveActivityTarget: Sendable, Hashable {
    /// These users' push-to-start tokens for the attributes type.
    case startTokens(userIDs: [String], attributesType: String)
    /// These users' update tokens (of one attributes type, when given).
    case updateTokens(userIDs: [String], attributesType: String?)
    /// The update token(s) of one activity.
    case activity(String)
}

extension SQLiteStore {
    public func registerLiveActivity(_ r: LiveActivityRegistration, now: Int64) async throws(StoreError) {
        try await write("register a Live Activity token") { db in
            let id = try Int64.fetchOne(db, sql: """
                INSERT INTO devices (user_id, app_type, token, platform, environment, is_active,
                                     registered_at, created_at, updated_at)
                VALUES (?, ?, ?, 'liveactivity', ?, 1, ?, ?, ?)
                ON CONFLICT (app_type, token) DO UPDATE SET
                    user_id = excluded.user_id,
                    company_id = NULL,
                    platform = excluded.platform,
                    environment = excluded.environment,
                    is_active = 1,
                    deactivated_reason = NULL,
                    deactivated_at = NULL,
                    registered_at = excluded.registered_at,
                    updated_at = excluded.updated_at
                RETURNING id
                """, arguments: [r.userID, r.appType, r.token.lowercased(), r.environment, now, now, now])!
            let (kind, activity): (String, String?) = switch r.kind {
            case .update(let activityID): ("update", activityID)
            case .start: ("start", nil)
            }
            try db.execute(sql: """
                INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type) VALUES (?, ?, ?, ?)
                ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, activity_id = excluded.activity_id,
                                                      attributes_type = excluded.attributes_type
                """, arguments: [id, kind, activity, r.attributesType])
        }
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
                try Row.fetchAll(db, sql: Self.liveActivitySelect + """
                    WHERE \(active) AND l.kind = 'update' AND l.activity_id = ?
                    """ + order, arguments: [appType, activityID])
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
