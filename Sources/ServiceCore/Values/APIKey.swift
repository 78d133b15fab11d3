/// What a backend API key may do: its role says which actions, its apps for which
/// apps. Read from `api_keys_file` (see `APIKeyFile`); a bare key line of the old
/// format is an `admin` key for every app.
package struct APIKey: Sendable, Equatable {
    /// Who the audit log and the idempotency keys name: never the secret.
    package let name: String
    package let role: Role
    /// The app types it may act for; nil: every app.
    package let apps: Set<String>?
    /// Named in the file (`NAME ROLE APPS KEY`), not a bare key line: its idempotency
    /// keys follow the name, so a rotated secret with the same name replays them.
    package let named: Bool

    package enum Role: String, Sendable, CaseIterable {
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
    package enum Permission: String, Sendable, CaseIterable {
        case read
        case testPush = "test_push"
        case send
        case admin
    }

    package func may(_ permission: Permission) -> Bool { role.permissions.contains(permission) }

    package func covers(app appType: String) -> Bool { apps?.contains(appType) ?? true }

    /// What `GET /v1/api-key` answers: the console shows only what the key may do.
    package var json: JSON {
        .object([
            ("name", .string(name)),
            ("role", .string(role.rawValue)),
            ("apps", apps.map { .array($0.sorted().map(JSON.string)) } ?? .string("*")),
            ("permissions", .array(Permission.allCases.filter(may).map { .string($0.rawValue) })),
        ])
    }
}
