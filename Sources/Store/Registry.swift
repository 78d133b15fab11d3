import Foundation
import GRDB

// The device registry, the preferences, and the fan-out read that joins them.

extension SQLiteStore {
    public func register(_ devices: [DeviceRegistration], maxActive: Int,
                         now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await writeUnlessRefused("register devices") { db in
            for (index, device) in devices.enumerated() {
                if let reason = try Self.register(db, device, maxActive: maxActive, now: now) {
                    throw RegistrationRefusal(reason, index: index)
                }
            }
        }
    }

    /// One registration in the caller's transaction; why it was refused, if it was.
    static func register(_ db: Database, _ device: DeviceRegistration, maxActive: Int,
                         now: Int64) throws -> RegistrationRefusal.Reason? {
        let token = device.token.lowercased()
        // Cached statements: a bulk registration runs these once per device, and
        // preparing each anew (parsing, and GRDB's authorizer walk) cost more than running it.
        let existing = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT id, user_id, platform FROM devices WHERE app_type = ? AND token = ?"),
            arguments: [device.appType, token])
        if let existing {
            guard existing["platform"] as String != "liveactivity" else { return .otherKind }
            // Optional details the app left out keep their old values (a token refresh
            // without deviceName should not erase the name), but only the same user's:
            // a phone that changed hands starts from what its new owner sent.
            try db.cachedStatement(sql: """
                UPDATE devices SET
                    device_name = CASE WHEN user_id = :user THEN coalesce(:name, device_name) ELSE :name END,
                    os_version = CASE WHEN user_id = :user THEN coalesce(:os, os_version) ELSE :os END,
                    app_version = CASE WHEN user_id = :user THEN coalesce(:app, app_version) ELSE :app END,
                    created_at = CASE WHEN user_id = :user THEN created_at ELSE :now END,
                    user_id = :user,
                    company_id = :company,
                    platform = :platform,
                    environment = :environment,
                    is_active = 1,
                    deactivated_reason = NULL,
                    deactivated_at = NULL,
                    registered_at = :now,
                    updated_at = :now
                WHERE id = :id
                """).execute(arguments: ["user": device.userID, "name": device.deviceName, "os": device.osVersion,
                                 "app": device.appVersion, "now": now, "company": device.companyID,
                                 "platform": device.platform, "environment": device.environment,
                                 "id": existing["id"] as Int64])
            if existing["user_id"] as String != device.userID {
                try forgetUse(db, deviceID: existing["id"])
            }
        } else {
            try db.cachedStatement(sql: """
                INSERT INTO devices (user_id, company_id, app_type, token, platform, environment,
                                     device_name, os_version, app_version, is_active,
                                     registered_at, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)
                """).execute(arguments: [device.userID, device.companyID, device.appType, token, device.platform,
                                 device.environment, device.deviceName, device.osVersion, device.appVersion,
                                 now, now, now])
        }
        try retireOldest(db, keeping: maxActive, of: .device, userID: device.userID, appType: device.appType, now: now)
        return nil
    }

    /// A token that changed hands: when the old owner was last delivered to is theirs.
    static func forgetUse(_ db: Database, deviceID: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM device_use WHERE device_id = ?").execute(arguments: [deviceID])
    }

    /// Deactivates a user's oldest active tokens of one kind and app beyond `maxActive`
    /// (a reinstall or a new phone leaves the old token behind: the newest are the live ones).
    static func retireOldest(_ db: Database, keeping maxActive: Int, of kind: TokenKind, userID: String,
                             appType: String, now: Int64) throws {
        try db.cachedStatement(sql: """
            UPDATE devices SET is_active = 0, deactivated_reason = 'replaced', deactivated_at = :now, updated_at = :now
            WHERE id IN (SELECT id FROM devices
                         WHERE user_id = :user AND app_type = :app AND is_active = 1 AND \(kind.rows)
                         ORDER BY registered_at DESC, id DESC LIMIT -1 OFFSET :max)
            """).execute(arguments: ["now": now, "user": userID, "app": appType, "max": maxActive])
    }

    /// `body` in one write transaction, rolled back whole when it throws a refusal,
    /// which is returned (any other error is the store's).
    func writeUnlessRefused(_ doing: String,
                            _ body: @escaping @Sendable (Database) throws -> Void) async throws(StoreError) -> RegistrationRefusal? {
        do {
            try await pool.write(body)
            return nil
        } catch let refusal as RegistrationRefusal {
            return refusal
        } catch {
            throw StoreError(error, doing)
        }
    }

    public func unregister(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await write("unregister a device") { db in
            try db.execute(sql: """
                UPDATE devices SET is_active = 0, deactivated_reason = 'unregistered',
                                   deactivated_at = ?, updated_at = ?
                WHERE user_id = ? AND token = ? AND is_active = 1 AND platform <> 'liveactivity'
                """, arguments: [now, now, userID, token.lowercased()])
            return db.changesCount > 0
        }
    }

    public func devices(userID: String) async throws(StoreError) -> [DeviceRow] {
        try await read("list devices") { db in
            try Row.fetchAll(db, sql: """
                SELECT d.id, d.platform, d.app_type, d.device_name, d.os_version, d.app_version, u.last_used_at,
                       d.created_at
                FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
                WHERE d.user_id = ? AND d.is_active = 1 AND d.platform <> 'liveactivity'
                ORDER BY d.registered_at DESC, d.id DESC
                """, arguments: [userID]).map { row in
                DeviceRow(id: row["id"], platform: row["platform"], appType: row["app_type"],
                          deviceName: row["device_name"], osVersion: row["os_version"],
                          appVersion: row["app_version"], lastUsedAt: row["last_used_at"],
                          createdAt: row["created_at"])
            }
        }
    }

    // MARK: Preferences

    public func preferences(userID: String, appType: String) async throws(StoreError) -> [String: PreferenceValue] {
        try await read("read preferences") { db in
            var saved: [String: PreferenceValue] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, value, text_value FROM preferences WHERE user_id = ? AND app_type = ?",
                                        arguments: [userID, appType]) {
                saved[row[0]] = PreferenceValue(value: row[1], text: row[2])
            }
            return saved
        }
    }

    public func updatePreferences(userID: String, appType: String, _ changes: [String: PreferenceValue],
                                  now: Int64) async throws(StoreError) {
        guard !changes.isEmpty else { return }
        try await write("update preferences") { db in
            let upsert = try db.cachedStatement(sql: """
                INSERT INTO preferences (user_id, app_type, key, value, text_value, updated_at) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (user_id, app_type, key) DO UPDATE SET value = excluded.value, text_value = excluded.text_value,
                                                                   updated_at = excluded.updated_at
                """)
            for (key, value) in changes {
                try upsert.execute(arguments: [userID, appType, key, value.bool, value.text, now])
            }
        }
    }

    // MARK: Fan-out

    public func recipients(appType: String, audience: Audience) async throws(StoreError) -> [Recipient] {
        try await read("find recipients") { db in try Self.recipients(db, appType: appType, audience: audience) }
    }

    /// The read behind `recipients`, in the caller's transaction (a fan-out's is the
    /// enqueue's own: see `fanOut`).
    static func recipients(_ db: Database, appType: String, audience: Audience) throws -> [Recipient] {
        // Who: named users in the order given, or everyone with an active token of
        // the app in the company, ordered by user id (see `RecipientsFold`).
        var fold: RecipientsFold
        var devicesInCompany: String?
        switch audience {
        case .users(let ids):
            fold = RecipientsFold(users: ids)
            guard !fold.isEmpty else { return [] }
            let rows = try Row.fetchCursor(db, sql: """
                SELECT user_id, id, token, environment FROM devices
                WHERE user_id IN (SELECT value FROM json_each(?)) AND app_type = ? AND is_active = 1
                  AND platform = 'ios'
                ORDER BY registered_at DESC, id DESC
                """, arguments: [jsonArray(fold.users), appType])
            while let row = try rows.next() { try fold.device(row) }
        case .company(let company):
            // A company's notification goes only to the devices registered with
            // that company, even if a user also works elsewhere: exactly the company
            // index's rows, one pass in user order.
            devicesInCompany = company
            fold = RecipientsFold()
            let rows = try Row.fetchCursor(db, sql: Self.companyDevicesSQL, arguments: [company, appType])
            while let row = try rows.next() { try fold.companyDevice(row) }
            guard !fold.isEmpty else { return [] }
        }

        let preferenceRows = if let company = devicesInCompany {
            // A join, not `user_id IN (SELECT …)`: that list is built whole (100k
            // user ids) even when no one saved a preference. A user with two
            // devices gets their rows twice, which the fold absorbs.
            try Row.fetchCursor(db, sql: """
                SELECT p.user_id, p.key, p.value, p.text_value
                FROM devices v JOIN preferences p ON p.user_id = v.user_id AND p.app_type = v.app_type
                WHERE v.company_id = ?2 AND v.app_type = ?1 AND v.is_active = 1
                """, arguments: [appType, company])
        } else {
            try Row.fetchCursor(db, sql: """
                SELECT user_id, key, value, text_value FROM preferences
                WHERE user_id IN (SELECT value FROM json_each(?)) AND app_type = ?
                """, arguments: [jsonArray(fold.users), appType])
        }
        while let row = try preferenceRows.next() { try fold.preference(row) }
        return fold.result()
    }
}

extension SQLiteStore {
    /// A company's active devices of an app, a user's rows together, newest first.
    /// The index `devices_by_company` (v7) holds them in this order: no sort.
    static let companyDevicesSQL = """
        SELECT user_id, id, token, environment, platform = 'ios' FROM devices
        WHERE company_id = ? AND app_type = ? AND is_active = 1
        ORDER BY user_id, registered_at DESC, id DESC
        """
}
