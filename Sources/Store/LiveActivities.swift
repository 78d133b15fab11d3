/// `LiveActivityStore`, once for both engines (the contract and how the tokens are
/// kept: `LiveActivityStore`). Text is ordered byte-wise on both engines (COLLATE "C"
/// on PostgreSQL, as SQLite orders it).
extension StoreEngine {
    public func registerLiveActivity(_ r: LiveActivityRegistration, maxActive: Int,
                                     now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await writingUnlessRefused("register a Live Activity token") { c in
            if let reason = try await Self.registerLiveActivity(c, r, maxActive: maxActive, now: now) {
                throw RegistrationRefusal(reason)
            }
        }
    }

    /// One registration in the caller's transaction; why it was refused, if it was (the
    /// caller rolls back what it wrote). Each step is one statement whatever another
    /// transaction does at the same moment: the rows it meets are locked (on
    /// PostgreSQL) and read as they are then.
    static func registerLiveActivity(_ c: Connection, _ r: LiveActivityRegistration, maxActive: Int,
                                     now: Int64) async throws -> RegistrationRefusal.Reason? {
        let token = r.token.lowercased()
        let (kind, activity): (String, String?) = switch r.kind {
        case .update(let activityID): ("update", activityID)
        case .start: ("start", nil)
        }
        if let activity {
            // The first registration of an activity makes its user the owner.
            let owner = try await c.row(LiveActivityStatements.claimActivity, [r.appType, activity, r.userID, now])
            guard try owner?.string(0) == r.userID else { return .activityOfAnotherUser }
        }
        try await c.run(RegistryStatements.forgetUse(of: .liveActivity), [r.appType, token, r.userID])
        guard let id = try await c.int64(LiveActivityStatements.upsertDevice,
                                         [r.userID, r.appType, token, r.environment, now]) else { return .otherKind }
        try await c.run(LiveActivityStatements.upsertToken, [id, kind, activity, r.attributesType])
        try await c.run(RegistryStatements.retireOldest(of: .liveActivity), [now, r.userID, r.appType, maxActive])
        return nil
    }

    public func unregisterLiveActivity(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await writing("unregister a Live Activity token") { c in
            try await !c.rows(LiveActivityStatements.unregister, [now, userID, token.lowercased()]).isEmpty
        }
    }

    public func liveActivityTokens(userID: String) async throws(StoreError) -> [LiveActivityToken] {
        try await reading("list Live Activity tokens") { c in
            try await c.rows(LiveActivityStatements.userTokens, [userID]).map(LiveActivityToken.init)
        }
    }

    public func liveActivityTokens(appType: String, _ target: LiveActivityTarget) async throws(StoreError) -> [LiveActivityToken] {
        try await reading("find Live Activity tokens") { c in
            let rows = switch target {
            case .startTokens(let users, let attributesType):
                try await c.rows(LiveActivityStatements.startTokens, [appType, attributesType, StoreValue.list(users)])
            case .updateTokens(let users, let attributesType):
                try await c.rows(LiveActivityStatements.updateTokens, [appType, attributesType, StoreValue.list(users)])
            case .activity(let activityID):
                try await c.rows(LiveActivityStatements.activityTokens, [appType, activityID])
            }
            return try rows.map(LiveActivityToken.init)
        }
    }
}

enum LiveActivityStatements {
    /// An activity's owner: the user who first registered it, this one if none did.
    /// 1 app, 2 activity, 3 user, 4 now. PostgreSQL keeps the row locked until the
    /// registration commits.
    static let claimActivity = Spelling("""
        INSERT INTO live_activities (app_type, activity_id, user_id, created_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (app_type, activity_id) DO UPDATE SET user_id = live_activities.user_id
        RETURNING user_id
        """)

    /// A Live Activity token's `devices` row: moved to this user, reactivated. Its id;
    /// none when the token is a device token (refused). 1 user, 2 app, 3 token,
    /// 4 environment, 5 now.
    static let upsertDevice = Spelling(sqlite: upsertDeviceSpelling(active: "1").sqlite,
                                       postgres: upsertDeviceSpelling(active: "true").postgres)

    private static func upsertDeviceSpelling(active: String) -> Spelling {
        Spelling("""
            INSERT INTO devices (user_id, app_type, token, platform, environment, is_active,
                                 registered_at, created_at, updated_at)
            VALUES ($1, $2, $3, 'liveactivity', $4, \(active), $5, $5, $5)
            ON CONFLICT (app_type, token) DO UPDATE SET
                created_at = CASE WHEN devices.user_id = excluded.user_id THEN devices.created_at
                                  ELSE excluded.created_at END,
                user_id = excluded.user_id,
                company_id = NULL,
                environment = excluded.environment,
                is_active = \(active),
                deactivated_reason = NULL,
                deactivated_at = NULL,
                registered_at = excluded.registered_at,
                updated_at = excluded.updated_at
            WHERE devices.platform = 'liveactivity'
            RETURNING id
            """)
    }

    /// Which kind of Live Activity token device 1 is: 2 kind, 3 activity (NULL for a
    /// push-to-start token), 4 attributes type.
    static let upsertToken = Spelling("""
        INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type) VALUES ($1, $2, $3, $4)
        ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, activity_id = excluded.activity_id,
                                              attributes_type = excluded.attributes_type
        """)

    /// One row when the user's active Live Activity token was deactivated: 1 now,
    /// 2 user, 3 token.
    static let unregister = Spelling(
        sqlite: """
            UPDATE devices SET is_active = 0, deactivated_reason = 'unregistered', deactivated_at = ?1, updated_at = ?1
            WHERE user_id = ?2 AND token = ?3 AND platform = 'liveactivity' AND is_active = 1
            RETURNING id
            """,
        postgres: """
            UPDATE devices SET is_active = false, deactivated_reason = 'unregistered', deactivated_at = $1,
                               updated_at = $1
            WHERE user_id = $2 AND token = $3 AND platform = 'liveactivity' AND is_active
            RETURNING id
            """)

    /// In this order, read by `LiveActivityToken.init(_:)`; `d` the device row, `l` its
    /// kind, `u` its last use.
    static let select = """
        SELECT d.id, d.user_id, d.token, d.app_type, l.kind, l.activity_id, l.attributes_type, d.environment,
               u.last_used_at, d.created_at
        FROM devices d JOIN live_activity_tokens l ON l.device_id = d.id LEFT JOIN device_use u ON u.device_id = d.id
        """

    /// A user's active Live Activity tokens, newest first: 1 the user.
    static let userTokens = Spelling(
        sqlite: """
            \(select)
            WHERE d.user_id = ?1 AND d.is_active = 1 AND d.platform = 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """,
        postgres: """
            \(select)
            WHERE d.user_id = $1 AND d.is_active AND d.platform = 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """)

    /// A send's tokens are an app's active ones (1 the app), by user, newest first.
    private static func targeted(_ sqlite: String, _ postgres: String) -> Spelling {
        Spelling(
            sqlite: """
                \(select)
                WHERE d.app_type = ?1 AND d.is_active = 1 AND d.platform = 'liveactivity' AND \(sqlite)
                ORDER BY d.user_id, d.registered_at DESC, d.id DESC
                """,
            postgres: """
                \(select)
                WHERE d.app_type = $1 AND d.is_active AND d.platform = 'liveactivity' AND \(postgres)
                ORDER BY d.user_id COLLATE "C", d.registered_at DESC, d.id DESC
                """)
    }

    /// Users 3's (a list) push-to-start tokens for attributes type 2.
    static let startTokens = targeted(
        "l.kind = 'start' AND l.attributes_type = ?2 AND d.user_id IN (SELECT value FROM json_each(?3))",
        "l.kind = 'start' AND l.attributes_type = $2 AND d.user_id = ANY($3::text[])")

    /// Users 3's (a list) update tokens, of attributes type 2 (NULL: any).
    static let updateTokens = targeted(
        "l.kind = 'update' AND coalesce(l.attributes_type = ?2, 1) AND d.user_id IN (SELECT value FROM json_each(?3))",
        "l.kind = 'update' AND ($2::text IS NULL OR l.attributes_type = $2::text) AND d.user_id = ANY($3::text[])")

    /// Activity 2's update tokens: its owner's only (another user's token under the
    /// same id, one registered before owners were kept, reaches no one).
    static let activityTokens = targeted(
        """
        l.kind = 'update' AND l.activity_id = ?2
          AND d.user_id = (SELECT user_id FROM live_activities WHERE app_type = d.app_type AND activity_id = ?2)
        """,
        """
        l.kind = 'update' AND l.activity_id = $2
          AND d.user_id = (SELECT user_id FROM live_activities WHERE app_type = $1 AND activity_id = $2)
        """)
}

extension LiveActivityToken {
    /// From `LiveActivityStatements.select`'s columns.
    init<R: StoreRow>(_ row: R) throws {
        let activity = try row.optionalString(5)
        self.init(id: try row.int64(0), userID: try row.string(1), token: try row.string(2), appType: try row.string(3),
                  kind: try row.string(4) == "update" ? .update(activityID: activity ?? "") : .start,
                  attributesType: try row.string(6), environment: try row.string(7),
                  lastUsedAt: try row.optionalInt64(8), createdAt: try row.int64(9))
    }
}
