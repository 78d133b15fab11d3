import PostgresNIO

// The device registry, the preferences, and the fan-out read that joins them: the
// same statements as SQLite's `Registry.swift`, in PostgreSQL's dialect. Text is
// ordered byte-wise (COLLATE "C"), as SQLite orders it, whatever the database's locale.

extension PostgresStore {
    public func register(_ devices: [DeviceRegistration], maxActive: Int,
                         now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await transactionUnlessRefused("register devices") { db in
            for (index, device) in devices.enumerated() {
                if let reason = try await Self.register(db, device, maxActive: maxActive, now: now) {
                    throw RegistrationRefusal(reason, index: index)
                }
            }
        }
    }

    /// One registration in the caller's transaction; why it was refused, if it was.
    /// One upsert whatever another transaction does at the same moment: the row it
    /// meets is locked and read as it is then.
    static func register(_ db: PostgresConnection, _ device: DeviceRegistration, maxActive: Int,
                         now: Int64) async throws -> RegistrationRefusal.Reason? {
        // Optional details the app left out keep their old values (a token refresh
        // without deviceName should not erase the name), but only the same user's: a
        // phone that changed hands starts from what its new owner sent. A Live
        // Activity token is not updated (no row comes back): refused.
        try await forgetUse(db, appType: device.appType, token: device.token, unlessUser: device.userID,
                            liveActivity: false)
        let stored = try await db.rows("""
            INSERT INTO devices (user_id, company_id, app_type, token, platform, environment,
                                 device_name, os_version, app_version, is_active,
                                 registered_at, created_at, updated_at)
            VALUES (\(device.userID), \(device.companyID), \(device.appType), \(device.token.lowercased()),
                    \(device.platform), \(device.environment), \(device.deviceName), \(device.osVersion),
                    \(device.appVersion), true, \(now), \(now), \(now))
            ON CONFLICT (app_type, token) DO UPDATE SET
                device_name = CASE WHEN devices.user_id = excluded.user_id
                                   THEN coalesce(excluded.device_name, devices.device_name) ELSE excluded.device_name END,
                os_version = CASE WHEN devices.user_id = excluded.user_id
                                  THEN coalesce(excluded.os_version, devices.os_version) ELSE excluded.os_version END,
                app_version = CASE WHEN devices.user_id = excluded.user_id
                                   THEN coalesce(excluded.app_version, devices.app_version) ELSE excluded.app_version END,
                created_at = CASE WHEN devices.user_id = excluded.user_id THEN devices.created_at ELSE excluded.created_at END,
                user_id = excluded.user_id,
                company_id = excluded.company_id,
                platform = excluded.platform,
                environment = excluded.environment,
                is_active = true,
                deactivated_reason = NULL,
                deactivated_at = NULL,
                registered_at = excluded.registered_at,
                updated_at = excluded.updated_at
            WHERE devices.platform <> 'liveactivity'
            RETURNING id
            """)
        guard !stored.isEmpty else { return .otherKind }
        try await retireOldest(db, keeping: maxActive, of: .device, userID: device.userID, appType: device.appType, now: now)
        return nil
    }

    /// A token about to change hands: when the old owner was last delivered to is
    /// theirs, not the new owner's (as SQLite's `forgetUse`).
    static func forgetUse(_ db: PostgresConnection, appType: String, token: String, unlessUser userID: String,
                          liveActivity: Bool) async throws {
        try await db.run("""
            DELETE FROM device_use u USING devices d
            WHERE u.device_id = d.id AND d.app_type = \(appType) AND d.token = \(token.lowercased())
              AND d.user_id <> \(userID) AND (d.platform = 'liveactivity') = \(liveActivity)
            """)
    }

    /// Deactivates a user's oldest active tokens of one kind and app beyond `maxActive`
    /// (a reinstall or a new phone leaves the old token behind: the newest are the live ones).
    static func retireOldest(_ db: PostgresConnection, keeping maxActive: Int, of kind: TokenKind, userID: String,
                             appType: String, now: Int64) async throws {
        try await db.run("""
            UPDATE devices SET is_active = false, deactivated_reason = 'replaced', deactivated_at = \(now),
                               updated_at = \(now)
            WHERE id IN (SELECT id FROM devices
                         WHERE user_id = \(userID) AND app_type = \(appType) AND is_active AND \(unescaped: kind.rows)
                         ORDER BY registered_at DESC, id DESC OFFSET \(Int64(maxActive)))
            """)
    }

    /// `body` in one transaction, rolled back whole when it throws a refusal, which is
    /// returned (any other error is the store's).
    func transactionUnlessRefused(_ doing: String, _ body: @Sendable (PostgresConnection) async throws -> Void)
        async throws(StoreError) -> RegistrationRefusal?
    {
        try await transaction(doing) { db -> RegistrationRefusal? in
            try await db.run("SAVEPOINT registering")
            do {
                try await body(db)
                return nil
            } catch let refusal as RegistrationRefusal {
                // Everything the body wrote is undone; the transaction, empty, commits
                // (thrown, the refusal would read as the store's own failure).
                try await db.run("ROLLBACK TO SAVEPOINT registering")
                return refusal
            }
        }
    }

    public func unregister(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await !rows("unregister a device", """
            UPDATE devices SET is_active = false, deactivated_reason = 'unregistered',
                               deactivated_at = \(now), updated_at = \(now)
            WHERE user_id = \(userID) AND token = \(token.lowercased()) AND is_active AND platform <> 'liveactivity'
            RETURNING id
            """).isEmpty
    }

    public func devices(userID: String) async throws(StoreError) -> [DeviceRow] {
        let found = try await rows("list devices", """
            SELECT d.id, d.platform, d.app_type, d.device_name, d.os_version, d.app_version, u.last_used_at, d.created_at
            FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE d.user_id = \(userID) AND d.is_active AND d.platform <> 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """)
        do {
            return try found.map { row in
                DeviceRow(id: try row.get(0), platform: try row.get(1), appType: try row.get(2),
                          deviceName: try row.get(3), osVersion: try row.get(4), appVersion: try row.get(5),
                          lastUsedAt: try row.get(6), createdAt: try row.get(7))
            }
        } catch {
            throw StoreError(postgres: error, "list devices", configuration)
        }
    }

    // MARK: Preferences

    public func preferences(userID: String, appType: String) async throws(StoreError) -> [String: PreferenceValue] {
        let found = try await rows("read preferences", """
            SELECT key, value, text_value FROM preferences WHERE user_id = \(userID) AND app_type = \(appType)
            """)
        do {
            var saved: [String: PreferenceValue] = [:]
            for row in found {
                saved[try row.get(0, String.self)] = PreferenceValue(value: try row.get(1), text: try row.get(2))
            }
            return saved
        } catch {
            throw StoreError(postgres: error, "read preferences", configuration)
        }
    }

    public func updatePreferences(userID: String, appType: String, _ changes: [String: PreferenceValue],
                                  now: Int64) async throws(StoreError) {
        guard !changes.isEmpty else { return }
        // One statement for all keys: the arrays are unnested side by side. A toggle
        // travels as 'true'/'false' text (arrays of postgres-nio carry no NULLs), cast
        // back where it is not NULL.
        let keys = Array(changes.keys)
        let toggles = keys.map { changes[$0]!.bool.map { $0 ? "true" : "false" } ?? "" }
        let texts = keys.map { changes[$0]!.text ?? "" }
        let isText = keys.map { changes[$0]!.text != nil }
        _ = try await rows("update preferences", """
            INSERT INTO preferences (user_id, app_type, key, value, text_value, updated_at)
            SELECT \(userID), \(appType), k, CASE WHEN t THEN NULL ELSE b::boolean END, CASE WHEN t THEN x END, \(now)
            FROM unnest(\(keys)::text[], \(toggles)::text[], \(texts)::text[], \(isText)::boolean[]) AS u (k, b, x, t)
            ON CONFLICT (user_id, app_type, key) DO UPDATE SET value = excluded.value, text_value = excluded.text_value,
                                                               updated_at = excluded.updated_at
            """)
    }

    // MARK: Fan-out

    public func recipients(appType: String, audience: Audience) async throws(StoreError) -> [Recipient] {
        let doing = "find recipients"
        // Who: named users in the order given (each once, device or not, so the service
        // can count "no_devices"), or everyone with an active token of the app in the
        // company, ordered by user id (an Android-only user is one of them, with no iOS
        // device: "no_devices" too). One snapshot for the three reads.
        return try await transaction(doing) { db -> [Recipient] in
            try await db.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            switch audience {
            case .users(let ids):
                var seen = Set<String>()
                let users = ids.filter { seen.insert($0).inserted }
                guard !users.isEmpty else { return [] }
                let devices = try await db.rows("""
                    SELECT user_id, id, token, environment FROM devices
                    WHERE user_id = ANY(\(users)) AND app_type = \(appType) AND is_active AND platform = 'ios'
                    ORDER BY registered_at DESC, id DESC
                    """)
                let preferences = try await db.rows("""
                    SELECT user_id, key, value, text_value FROM preferences
                    WHERE user_id = ANY(\(users)) AND app_type = \(appType)
                    """)
                return try Self.recipients(users, devices, preferences)
            case .company(let company):
                let users = try await db.rows("""
                    SELECT DISTINCT user_id COLLATE "C" FROM devices
                    WHERE company_id = \(company) AND app_type = \(appType) AND is_active ORDER BY 1
                    """).map { try $0.get(0, String.self) }
                guard !users.isEmpty else { return [] }
                // A company's notification goes only to the devices registered with that
                // company, even if a user also works elsewhere.
                let devices = try await db.rows("""
                    SELECT user_id, id, token, environment FROM devices
                    WHERE company_id = \(company) AND app_type = \(appType) AND is_active AND platform = 'ios'
                    ORDER BY registered_at DESC, id DESC
                    """)
                let preferences = try await db.rows("""
                    SELECT user_id, key, value, text_value FROM preferences
                    WHERE user_id = ANY(\(users)) AND app_type = \(appType)
                    """)
                return try Self.recipients(users, devices, preferences)
            }
        }
    }

    /// Users in order, each with their devices and saved preferences.
    static func recipients(_ users: [String], _ deviceRows: [PostgresRandomAccessRow],
                                   _ preferenceRows: [PostgresRandomAccessRow]) throws -> [Recipient] {
        var fold = RecipientsFold(users: users)
        for row in deviceRows { try fold.device(row) }
        for row in preferenceRows { try fold.preference(row) }
        return fold.result()
    }
}
