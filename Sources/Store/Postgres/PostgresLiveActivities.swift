import PostgresNIO

// Live Activity push tokens on PostgreSQL: the same rows as SQLite's
// (LiveActivities.swift): a `devices` row with platform 'liveactivity', plus its
// `live_activity_tokens` row saying which kind it is, and each activity's owner in
// `live_activities`.

extension PostgresStore {
    public func registerLiveActivity(_ r: LiveActivityRegistration, maxActive: Int,
                                     now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        let (kind, activity): (String, String?) = switch r.kind {
        case .update(let activityID): ("update", activityID)
        case .start: ("start", nil)
        }
        return try await transactionUnlessRefused("register a Live Activity token") { db in
            if let activity {
                // The first registration of an activity makes its user the owner; a
                // later one reads the owner, its row locked until this commits.
                let owner = try await db.rows("""
                    INSERT INTO live_activities (app_type, activity_id, user_id, created_at)
                    VALUES (\(r.appType), \(activity), \(r.userID), \(now))
                    ON CONFLICT (app_type, activity_id) DO UPDATE SET user_id = live_activities.user_id
                    RETURNING user_id
                    """)[0].get(0, String.self)
                guard owner == r.userID else { throw RegistrationRefusal(.activityOfAnotherUser) }
            }
            try await Self.forgetUse(db, appType: r.appType, token: r.token, unlessUser: r.userID, liveActivity: true)
            // A device token is not updated (no row comes back): refused.
            let device = try await db.rows("""
                INSERT INTO devices (user_id, app_type, token, platform, environment, is_active,
                                     registered_at, created_at, updated_at)
                VALUES (\(r.userID), \(r.appType), \(r.token.lowercased()), 'liveactivity', \(r.environment), true,
                        \(now), \(now), \(now))
                ON CONFLICT (app_type, token) DO UPDATE SET
                    created_at = CASE WHEN devices.user_id = excluded.user_id THEN devices.created_at
                                      ELSE excluded.created_at END,
                    user_id = excluded.user_id,
                    company_id = NULL,
                    environment = excluded.environment,
                    is_active = true,
                    deactivated_reason = NULL,
                    deactivated_at = NULL,
                    registered_at = excluded.registered_at,
                    updated_at = excluded.updated_at
                WHERE devices.platform = 'liveactivity'
                RETURNING id
                """)
            guard let id = try device.first?.get(0, Int64.self) else { throw RegistrationRefusal(.otherKind) }
            try await db.run("""
                INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type)
                VALUES (\(id), \(kind), \(activity)::text, \(r.attributesType))
                ON CONFLICT (device_id) DO UPDATE SET kind = excluded.kind, activity_id = excluded.activity_id,
                                                      attributes_type = excluded.attributes_type
                """)
            try await Self.retireOldest(db, keeping: maxActive, of: .liveActivity, userID: r.userID, appType: r.appType,
                                        now: now)
        }
    }

    public func unregisterLiveActivity(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await !rows("unregister a Live Activity token", """
            UPDATE devices SET is_active = false, deactivated_reason = 'unregistered', deactivated_at = \(now),
                               updated_at = \(now)
            WHERE user_id = \(userID) AND token = \(token.lowercased()) AND platform = 'liveactivity' AND is_active
            RETURNING id
            """).isEmpty
    }

    public func liveActivityTokens(userID: String) async throws(StoreError) -> [LiveActivityToken] {
        try await liveActivityTokens("list Live Activity tokens", """
            \(unescaped: Self.liveActivitySelectPostgres)
            WHERE d.user_id = \(userID) AND d.is_active AND d.platform = 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """)
    }

    public func liveActivityTokens(appType: String, _ target: LiveActivityTarget) async throws(StoreError) -> [LiveActivityToken] {
        let doing = "find Live Activity tokens"
        let select = Self.liveActivitySelectPostgres
        let order = #" ORDER BY d.user_id COLLATE "C", d.registered_at DESC, d.id DESC"#
        switch target {
        case .startTokens(let users, let attributesType):
            return try await liveActivityTokens(doing, """
                \(unescaped: select)
                WHERE d.app_type = \(appType) AND d.is_active AND d.platform = 'liveactivity'
                  AND l.kind = 'start' AND l.attributes_type = \(attributesType) AND d.user_id = ANY(\(users)::text[])
                \(unescaped: order)
                """)
        case .updateTokens(let users, let attributesType):
            return try await liveActivityTokens(doing, """
                \(unescaped: select)
                WHERE d.app_type = \(appType) AND d.is_active AND d.platform = 'liveactivity'
                  AND l.kind = 'update' AND (\(attributesType)::text IS NULL OR l.attributes_type = \(attributesType)::text)
                  AND d.user_id = ANY(\(users)::text[])
                \(unescaped: order)
                """)
        case .activity(let activityID):
            return try await liveActivityTokens(doing, """
                \(unescaped: select)
                WHERE d.app_type = \(appType) AND d.is_active AND d.platform = 'liveactivity'
                  AND l.kind = 'update' AND l.activity_id = \(activityID)
                  AND d.user_id = (SELECT user_id FROM live_activities
                                   WHERE app_type = \(appType) AND activity_id = \(activityID))
                \(unescaped: order)
                """)
        }
    }

    private func liveActivityTokens(_ doing: String, _ query: PostgresQuery) async throws(StoreError) -> [LiveActivityToken] {
        let found = try await rows(doing, query)
        do {
            return try found.map { row in
                let kind: String = try row.get(4)
                let activity: String? = try row.get(5)
                return LiveActivityToken(id: try row.get(0), userID: try row.get(1), token: try row.get(2),
                                         appType: try row.get(3),
                                         kind: kind == "update" ? .update(activityID: activity ?? "") : .start,
                                         attributesType: try row.get(6), environment: try row.get(7),
                                         lastUsedAt: try row.get(8), createdAt: try row.get(9))
            }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    static let liveActivitySelectPostgres = """
        SELECT d.id, d.user_id, d.token, d.app_type, l.kind, l.activity_id, l.attributes_type, d.environment,
               u.last_used_at, d.created_at
        FROM devices d JOIN live_activity_tokens l ON l.device_id = d.id LEFT JOIN device_use u ON u.device_id = d.id
        """
}
