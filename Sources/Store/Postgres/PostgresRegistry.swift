import PostgresNIO

// The device registry, the preferences, and the fan-out read that joins them: the
// same statements as SQLite's `Registry.swift`, in PostgreSQL's dialect. Text is
// ordered byte-wise (COLLATE "C"), as SQLite orders it, whatever the database's locale.

extension PostgresStore {
    public func register(_ device: DeviceRegistration, now: Int64) async throws(StoreError) {
        // Optional details the app left out keep their old values: a token refresh
        // without deviceName should not erase the name.
        _ = try await rows("register a device", """
            INSERT INTO devices (user_id, company_id, app_type, token, platform, environment,
                                 device_name, os_version, app_version, is_active,
                                 registered_at, created_at, updated_at)
            VALUES (\(device.userID), \(device.companyID), \(device.appType), \(device.token.lowercased()),
                    \(device.platform), \(device.environment), \(device.deviceName), \(device.osVersion),
                    \(device.appVersion), true, \(now), \(now), \(now))
            ON CONFLICT (app_type, token) DO UPDATE SET
                user_id = excluded.user_id,
                company_id = excluded.company_id,
                platform = excluded.platform,
                environment = excluded.environment,
                device_name = coalesce(excluded.device_name, devices.device_name),
                os_version = coalesce(excluded.os_version, devices.os_version),
                app_version = coalesce(excluded.app_version, devices.app_version),
                is_active = true,
                deactivated_reason = NULL,
                deactivated_at = NULL,
                registered_at = excluded.registered_at,
                updated_at = excluded.updated_at
            """)
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
            SELECT id, platform, app_type, device_name, os_version, app_version, last_used_at, created_at
            FROM devices WHERE user_id = \(userID) AND is_active AND platform <> 'liveactivity'
            ORDER BY registered_at DESC, id DESC
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
    private static func recipients(_ users: [String], _ deviceRows: [PostgresRandomAccessRow],
                                   _ preferenceRows: [PostgresRandomAccessRow]) throws -> [Recipient] {
        var devices: [String: [Recipient.Device]] = [:]
        for row in deviceRows {
            devices[try row.get(0, String.self), default: []].append(
                Recipient.Device(id: try row.get(1), token: try row.get(2), environment: try row.get(3)))
        }
        var preferences: [String: [String: PreferenceValue]] = [:]
        for row in preferenceRows {
            preferences[try row.get(0, String.self), default: [:]][try row.get(1, String.self)] =
                PreferenceValue(value: try row.get(2), text: try row.get(3))
        }
        return users.map { Recipient(userID: $0, preferences: preferences[$0] ?? [:], devices: devices[$0] ?? []) }
    }
}
