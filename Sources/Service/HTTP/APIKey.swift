/// What a backend API key may do: its role says which actions, its apps for which
/// apps. Read from `api_keys_file` (see `APIKeyFile`); a bare key line of the old
/// format is an `admin` key for every app.
struct APIKey: Sendable, Equatable {
    /// Who the audit log and the idempotency keys name: never the secret.
    let name: String
    let role: Role
    /// The app types it may act for; nil: every app.
    let apps: Set<String>?
    /// Named in the file (`NAME ROLE APPS KEY`), not a bare key line: its idempotency
    /// keys follow the name, so a rotated secret with the same name replays them.
    let named: Bool

    enum Role: String, Sendable, CaseIterable {
        /// Reads the delivery log and the support views.
        case read
        /// `read`, and a test push to one device.
        case support
        /// `read`, and everything that creates or cancels work: registrations,
        /// notifications, Live Activities, channels and broadcasts.
        case send
        /// Everything, the audit log included.
        case admin

        var permissions: Set<Permission> {
            switch self {
            case .read: [.read]
            case .support: [.read, .testPush]
            case .send: [.read, .send]
            case .admin: Set(Permission.allCases)
            }
        }
    }

    /// An action's class, as each route declares it.
    enum Permission: String, Sendable, CaseIterable {
        case read
        case testPush = "test_push"
        case send
        case admin
    }

    func may(_ permission: Permission) -> Bool { role.permissions.contains(permission) }

    func covers(app appType: String) -> Bool { apps?.contains(appType) ?? true }

    /// What `GET /v1/api-key` answers: the console shows only what the key may do.
    var json: JSON {
        .object([
            ("name", .string(name)),
            ("role", .string(role.rawValue)),
            ("apps", apps.map { .array($0.sorted().map(JSON.string)) } ?? .string("*")),
            ("permissions", .array(Permission.allCases.filter(may).map { .string($0.rawValue) })),
        ])
    }

    /// The idempotency scope: the name for a named key; for a bare key line, the
    /// secret's keyed hash, as before names existed, so that keys stored then still
    /// replay.
    func idempotencyScope(secret: String) -> String {
        named ? IdempotencyGate.scope(name: name) : IdempotencyGate.scope(secret)
    }
}

extension APIError {
    static func forbidden(_ message: String) -> APIError { APIError(status: .forbidden, message: message) }
}

extension ServiceContext {
    /// The API key the middleware accepted; a route behind it without one is a wiring bug.
    func requireKey() throws(APIError) -> APIKey {
        guard let apiKey else { throw .unauthorized("missing API key") }
        return apiKey
    }

    /// A 403 unless the request's API key may act for `appType`. Nothing has been
    /// read or changed yet when it is thrown.
    func authorize(app appType: String) throws(APIError) {
        let key = try requireKey()
        guard key.covers(app: appType) else {
            throw .forbidden("the API key '\(key.name)' may not act for app '\(appType)'")
        }
        audit.app = appType
    }

    /// A 403 unless the key covers every app (process-wide views).
    func authorizeAllApps() throws(APIError) {
        let key = try requireKey()
        guard key.apps == nil else {
            throw .forbidden("the API key '\(key.name)' is limited to some apps; this view covers every app")
        }
    }

    /// Whether the key covers `appType`, for filtering lists.
    func sees(app appType: String) -> Bool { apiKey?.covers(app: appType) ?? false }
}
