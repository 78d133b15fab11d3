import Synchronization

// The device registry, the preferences, and the fan-out read that joins them, once
// for both engines. PostgreSQL orders text byte-wise where it matters (COLLATE "C"),
// as SQLite does, whatever the database's locale.

extension StoreEngine {
    public func register(_ devices: [DeviceRegistration], maxActive: Int,
                         now: Int64) async throws(StoreError) -> RegistrationRefusal? {
        try await writingUnlessRefused("register devices") { c in
            for (index, device) in devices.enumerated() {
                if let reason = try await Self.register(c, device, maxActive: maxActive, now: now) {
                    throw RegistrationRefusal(reason, index: index)
                }
            }
        }
    }

    /// One registration in the caller's transaction; why it was refused, if it was.
    /// One upsert whatever another transaction does at the same moment: the row it
    /// meets is locked and read as it is then.
    static func register(_ c: Connection, _ device: DeviceRegistration, maxActive: Int,
                         now: Int64) async throws -> RegistrationRefusal.Reason? {
        let token = device.token.lowercased()
        // Before the upsert moves the token: the old owner's row is still theirs. A
        // refusal undoes it with the rest.
        try await c.run(RegistryStatements.forgetUse(of: .device), [device.appType, token, device.userID])
        let stored = try await c.rows(RegistryStatements.upsertDevice, [
            device.userID, device.companyID, device.appType, token, device.platform, device.environment,
            device.deviceName, device.osVersion, device.appVersion, now])
        guard !stored.isEmpty else { return .otherKind }
        try await c.run(RegistryStatements.retireOldest(of: .device),
                        [now, device.userID, device.appType, maxActive])
        return nil
    }

    /// `body` in one write transaction, rolled back whole when it throws a refusal,
    /// which is returned (any other error is the store's).
    func writingUnlessRefused(_ doing: String, _ body: @escaping @Sendable (Connection) async throws -> Void)
        async throws(StoreError) -> RegistrationRefusal?
    {
        // The engine reports what the body threw as its own failure: the refusal is
        // kept aside to be told apart.
        let refused = RefusalSeen()
        do {
            try await writing(doing) { c in
                do {
                    try await body(c)
                } catch let refusal as RegistrationRefusal {
                    refused.refusal.withLock { $0 = refusal }
                    throw refusal
                }
            }
            return nil
        } catch {
            if let refusal = refused.refusal.withLock({ $0 }) { return refusal }
            throw error
        }
    }

    public func unregister(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        try await writing("unregister a device") { c in
            try await !c.rows(RegistryStatements.unregister, [now, userID, token.lowercased()]).isEmpty
        }
    }

    public func devices(userID: String) async throws(StoreError) -> [DeviceRow] {
        try await reading("list devices") { c in
            try await c.rows(RegistryStatements.devices, [userID]).map(DeviceRow.init)
        }
    }

    // MARK: Preferences

    public func preferences(userID: String, appType: String) async throws(StoreError) -> [String: PreferenceValue] {
        try await reading("read preferences") { c in
            var saved: [String: PreferenceValue] = [:]
            for row in try await c.rows(RegistryStatements.preferences, [userID, appType]) {
                saved[try row.string(0)] = PreferenceValue(value: try row.optionalBool(1), text: try row.optionalString(2))
            }
            return saved
        }
    }

    /// A few keys (an app's toggles and quiet hours): one upsert each.
    public func updatePreferences(userID: String, appType: String, _ changes: [String: PreferenceValue],
                                  now: Int64) async throws(StoreError) {
        guard !changes.isEmpty else { return }
        try await writing("update preferences") { c in
            for (key, value) in changes {
                try await c.run(RegistryStatements.setPreference, [userID, appType, key, value.bool, value.text, now])
            }
        }
    }

    // MARK: Fan-out

    /// Who: named users in the order given (each once, device or not, so the service
    /// can count "no_devices"), or everyone with an active token of the app in the
    /// company, ordered by user id (an Android-only user is one of them, with no iOS
    /// device: "no_devices" too). One snapshot for the reads.
    public func recipients(appType: String, audience: Audience) async throws(StoreError) -> [Recipient] {
        try await reading("find recipients") { c -> [Recipient] in
            var fold: RecipientsFold
            switch audience {
            case .users(let ids):
                fold = RecipientsFold(users: ids)
                guard !fold.isEmpty else { return [] }
                let users: [any StoreBindable] = [StoreValue.list(fold.users), appType]
                try await c.forEachRow(RegistryStatements.usersDevices, users) { try fold.device($0) }
                try await c.forEachRow(RegistryStatements.usersPreferences, users) { try fold.preference($0) }
            case .company(let company):
                // A company's notification goes only to the devices registered with
                // that company, even if a user also works elsewhere.
                switch c.engine {
                case .sqlite:
                    // SQLite's index holds the company's rows in byte-wise user order:
                    // one pass, no list of users to look each up in.
                    fold = RecipientsFold()
                    try await c.forEachRow(RegistryStatements.companyDevices, [company, appType]) {
                        try fold.companyDevice($0)
                    }
                    guard !fold.isEmpty else { return [] }
                    try await c.forEachRow(RegistryStatements.companyPreferences, [company, appType]) {
                        try fold.preference($0)
                    }
                case .postgres:
                    // PostgreSQL's index orders user ids by the database's collation,
                    // not byte-wise: the users are listed in order first.
                    let users = try await c.rows(RegistryStatements.companyUsers, [company, appType])
                        .map { try $0.string(0) }
                    guard !users.isEmpty else { return [] }
                    fold = RecipientsFold(users: users)
                    try await c.forEachRow(RegistryStatements.companyIOSDevices, [company, appType]) {
                        try fold.device($0)
                    }
                    try await c.forEachRow(RegistryStatements.usersPreferences, [StoreValue.list(users), appType]) {
                        try fold.preference($0)
                    }
                }
            }
            return fold.result()
        }
    }
}

/// A refusal thrown inside a transaction, seen on its way out.
private final class RefusalSeen: Sendable {
    let refusal = Mutex<RegistrationRefusal?>(nil)
}

extension SQLiteStore {
    /// SQLite's company read, whose plan a test checks.
    static var companyDevicesSQL: String { RegistryStatements.companyDevices.sqlite }
}

enum RegistryStatements {
    /// A token about to change hands: when the old owner was last delivered to is
    /// theirs, not the new owner's. 1 app, 2 token, 3 the new owner.
    static func forgetUse(of kind: TokenKind) -> Spelling {
        switch kind {
        case .device: forgetDeviceUse
        case .liveActivity: forgetLiveActivityUse
        }
    }

    /// Deactivates a user's oldest active tokens of one kind and app beyond a number (a
    /// reinstall or a new phone leaves the old token behind: the newest are the live
    /// ones). 1 now, 2 user, 3 app, 4 how many stay.
    static func retireOldest(of kind: TokenKind) -> Spelling {
        switch kind {
        case .device: retireOldestDevices
        case .liveActivity: retireOldestLiveActivities
        }
    }

    /// A device token's registration; its id, none when the token is a Live Activity
    /// token (refused). Optional details the app left out keep their old values (a
    /// token refresh without deviceName should not erase the name), but only the same
    /// user's: a phone that changed hands starts from what its new owner sent.
    /// 1 user, 2 company, 3 app, 4 token, 5 platform, 6 environment, 7 device name,
    /// 8 OS version, 9 app version, 10 now.
    static let upsertDevice = Spelling(sqlite: upsertDeviceSpelling(active: "1").sqlite,
                                       postgres: upsertDeviceSpelling(active: "true").postgres)

    private static func upsertDeviceSpelling(active: String) -> Spelling {
        Spelling("""
            INSERT INTO devices (user_id, company_id, app_type, token, platform, environment,
                                 device_name, os_version, app_version, is_active,
                                 registered_at, created_at, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \(active), $10, $10, $10)
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
                is_active = \(active),
                deactivated_reason = NULL,
                deactivated_at = NULL,
                registered_at = excluded.registered_at,
                updated_at = excluded.updated_at
            WHERE devices.platform <> 'liveactivity'
            RETURNING id
            """)
    }

    private static let forgetDeviceUse = forgetUseSpelling(TokenKind.device.rows)
    private static let forgetLiveActivityUse = forgetUseSpelling(TokenKind.liveActivity.rows)

    private static func forgetUseSpelling(_ kind: String) -> Spelling {
        Spelling(
            sqlite: """
                DELETE FROM device_use WHERE device_id IN (
                    SELECT id FROM devices WHERE app_type = ?1 AND token = ?2 AND user_id <> ?3 AND \(kind))
                """,
            postgres: """
                DELETE FROM device_use u USING devices d
                WHERE u.device_id = d.id AND d.app_type = $1 AND d.token = $2 AND d.user_id <> $3 AND \(kind)
                """)
    }

    private static let retireOldestDevices = retireOldestSpelling(TokenKind.device.rows)
    private static let retireOldestLiveActivities = retireOldestSpelling(TokenKind.liveActivity.rows)

    private static func retireOldestSpelling(_ kind: String) -> Spelling {
        Spelling(
            sqlite: """
                UPDATE devices SET is_active = 0, deactivated_reason = 'replaced', deactivated_at = ?1, updated_at = ?1
                WHERE id IN (SELECT id FROM devices
                             WHERE user_id = ?2 AND app_type = ?3 AND is_active = 1 AND \(kind)
                             ORDER BY registered_at DESC, id DESC LIMIT -1 OFFSET ?4)
                """,
            postgres: """
                UPDATE devices SET is_active = false, deactivated_reason = 'replaced', deactivated_at = $1,
                                   updated_at = $1
                WHERE id IN (SELECT id FROM devices
                             WHERE user_id = $2 AND app_type = $3 AND is_active AND \(kind)
                             ORDER BY registered_at DESC, id DESC OFFSET $4)
                """)
    }

    /// One row when the user's active device token was deactivated: 1 now, 2 user, 3 token.
    static let unregister = Spelling(
        sqlite: """
            UPDATE devices SET is_active = 0, deactivated_reason = 'unregistered', deactivated_at = ?1, updated_at = ?1
            WHERE user_id = ?2 AND token = ?3 AND is_active = 1 AND platform <> 'liveactivity'
            RETURNING id
            """,
        postgres: """
            UPDATE devices SET is_active = false, deactivated_reason = 'unregistered', deactivated_at = $1,
                               updated_at = $1
            WHERE user_id = $2 AND token = $3 AND is_active AND platform <> 'liveactivity'
            RETURNING id
            """)

    /// User 1's active device tokens, newest first (read by `DeviceRow.init`).
    static let devices = Spelling(
        sqlite: """
            SELECT d.id, d.platform, d.app_type, d.device_name, d.os_version, d.app_version, u.last_used_at, d.created_at
            FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE d.user_id = ?1 AND d.is_active = 1 AND d.platform <> 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """,
        postgres: """
            SELECT d.id, d.platform, d.app_type, d.device_name, d.os_version, d.app_version, u.last_used_at, d.created_at
            FROM devices d LEFT JOIN device_use u ON u.device_id = d.id
            WHERE d.user_id = $1 AND d.is_active AND d.platform <> 'liveactivity'
            ORDER BY d.registered_at DESC, d.id DESC
            """)

    /// key, toggle, text of user 1's saved preferences for app 2.
    static let preferences = Spelling("""
        SELECT key, value, text_value FROM preferences WHERE user_id = $1 AND app_type = $2
        """)

    /// 1 user, 2 app, 3 key, 4 toggle, 5 text (one of the two), 6 now.
    static let setPreference = Spelling("""
        INSERT INTO preferences (user_id, app_type, key, value, text_value, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (user_id, app_type, key) DO UPDATE SET value = excluded.value, text_value = excluded.text_value,
                                                           updated_at = excluded.updated_at
        """)

    /// Named users' active iOS tokens of an app, newest first (`RecipientsFold.device`):
    /// 1 the users, 2 app.
    static let usersDevices = Spelling(
        sqlite: """
            SELECT user_id, id, token, environment FROM devices
            WHERE user_id IN (SELECT value FROM json_each(?1)) AND app_type = ?2 AND is_active = 1
              AND platform = 'ios'
            ORDER BY registered_at DESC, id DESC
            """,
        postgres: """
            SELECT user_id, id, token, environment FROM devices
            WHERE user_id = ANY($1::text[]) AND app_type = $2 AND is_active AND platform = 'ios'
            ORDER BY registered_at DESC, id DESC
            """)

    /// Named users' saved preferences for an app (`RecipientsFold.preference`): 1 the
    /// users, 2 app.
    static let usersPreferences = Spelling(
        sqlite: """
            SELECT user_id, key, value, text_value FROM preferences
            WHERE user_id IN (SELECT value FROM json_each(?1)) AND app_type = ?2
            """,
        postgres: """
            SELECT user_id, key, value, text_value FROM preferences
            WHERE user_id = ANY($1::text[]) AND app_type = $2
            """)

    /// SQLite's company read: a company's active devices of an app (any platform),
    /// a user's rows together, newest first (`RecipientsFold.companyDevice`); 1
    /// company, 2 app. The index `devices_by_company` (v7) holds them in this order:
    /// no sort.
    static let companyDevices = Spelling.only(sqlite: """
        SELECT user_id, id, token, environment, platform = 'ios' FROM devices
        WHERE company_id = ?1 AND app_type = ?2 AND is_active = 1
        ORDER BY user_id, registered_at DESC, id DESC
        """)

    /// SQLite's company read: the preferences of a company's users (1 company, 2
    /// app). A join, not `user_id IN (SELECT …)`: that list is built whole (100k user
    /// ids) even when no one saved a preference. A user with two devices gets their
    /// rows twice, which the fold absorbs.
    static let companyPreferences = Spelling.only(sqlite: """
        SELECT p.user_id, p.key, p.value, p.text_value
        FROM devices v JOIN preferences p ON p.user_id = v.user_id AND p.app_type = v.app_type
        WHERE v.company_id = ?1 AND v.app_type = ?2 AND v.is_active = 1
        """)

    /// PostgreSQL's company read: the users with an active token of app 2 in company
    /// 1, byte-wise in order.
    static let companyUsers = Spelling.only(postgres: """
        SELECT DISTINCT user_id COLLATE "C" FROM devices
        WHERE company_id = $1 AND app_type = $2 AND is_active ORDER BY 1
        """)

    /// PostgreSQL's company read: the company's active iOS tokens of an app, newest
    /// first (`RecipientsFold.device`); 1 company, 2 app.
    static let companyIOSDevices = Spelling.only(postgres: """
        SELECT user_id, id, token, environment FROM devices
        WHERE company_id = $1 AND app_type = $2 AND is_active AND platform = 'ios'
        ORDER BY registered_at DESC, id DESC
        """)
}

extension DeviceRow {
    init<R: StoreRow>(_ row: R) throws {
        self.init(id: try row.int64(0), platform: try row.string(1), appType: try row.string(2),
                  deviceName: try row.optionalString(3), osVersion: try row.optionalString(4),
                  appVersion: try row.optionalString(5), lastUsedAt: try row.optionalInt64(6),
                  createdAt: try row.int64(7))
    }
}
