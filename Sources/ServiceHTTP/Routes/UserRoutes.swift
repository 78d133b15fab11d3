import Hummingbird
import ServiceCore
import ServiceDelivery
import Store

/// The app-facing API, byte for byte the seed's (SEED-BACKENDS.md): the user is
/// the verified JWT's `sub`, and every route reads and changes only that user's
/// tokens and preferences.
package struct UserRoutes: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth

    package func register(on router: Router<ServiceContext>) {
        let group = router.group("api/user").add(middleware: UserAuthMiddleware(auth: auth))
        group.post("device-token", use: registerDevice)
        group.delete("device-token", use: unregisterDevice)
        group.get("device-tokens", use: listDevices)
        group.get("push-preferences", use: getPreferences)
        group.put("push-preferences", use: putPreferences)
    }

    @Sendable func registerDevice(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let json = try await body.object(request)
        let device = try Registration.parse(json, userID: user.userID, companyID: user.companyID, config: config)
        try await Registration.store([device], in: store, config: config, now: clock.nowMillis)
        return JSONResponse.success(message: "Device token registered successfully")
    }

    @Sendable func unregisterDevice(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let json = try await body.object(request)
        let token = try Registration.requiredToken(json, field: "deviceToken")
        guard try await store.unregister(userID: user.userID, token: token, now: clock.nowMillis) else {
            throw APIError.notFound("device token not found")
        }
        return JSONResponse.success(message: "Device token unregistered successfully")
    }

    @Sendable func listDevices(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let rows = try await store.devices(userID: user.userID)
        let tokens: [JSON] = rows.map { row in
            .object([
                ("id", .int64(row.id)),
                ("platform", .string(row.platform)),
                ("app_type", .string(row.appType)),
                ("device_name", row.deviceName.map(JSON.string) ?? .null),
                ("os_version", row.osVersion.map(JSON.string) ?? .null),
                ("app_version", row.appVersion.map(JSON.string) ?? .null),
                ("last_used_at", Timestamp.json(row.lastUsedAt)),
                ("created_at", Timestamp.json(row.createdAt)),
            ])
        }
        return JSONResponse.ok(.object([("success", .bool(true)), ("tokens", .array(tokens))]))
    }

    @Sendable func getPreferences(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let app = try await preferenceApp(request, userID: user.userID)
        let saved = try await store.preferences(userID: user.userID, appType: app.appType)
        return JSONResponse.ok(.object([("success", .bool(true)), ("preferences", UserRoutes.preferencesJSON(app, saved))]))
    }

    @Sendable func putPreferences(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let app = try await preferenceApp(request, userID: user.userID)
        guard case .object(let members) = try await body.object(request) else { throw APIError.badRequest("the body must be a JSON object") }
        var changes: [String: PreferenceValue] = [:]
        for (key, value) in members {
            if QuietHours.keys.contains(key) {
                switch QuietHours.check(key, value) {
                case .success(let v): changes[key] = v
                case .failure(let invalid): throw APIError.badRequest(invalid.why)
                }
                continue
            }
            guard key == AppConfig.masterKey || app.preferenceKeys.contains(key) else {
                throw APIError.badRequest("unknown preference '\(key)' for app \(app.appType)")
            }
            guard let flag = value.boolValue else { throw APIError.badRequest("preference '\(key)' must be true or false") }
            changes[key] = .bool(flag)
        }
        try await store.updatePreferences(userID: user.userID, appType: app.appType, changes, now: clock.nowMillis)
        return JSONResponse.success(message: "Push preferences updated successfully")
    }

    /// The seed's preference calls name no app: an `appType` query parameter if
    /// given, else the app of the user's most recent registration, else the first
    /// configured app.
    func preferenceApp(_ request: Request, userID: String) async throws -> AppConfig {
        if let name = request.uri.queryParameters["appType"] {
            guard let app = config.app(String(name)) else { throw APIError.badRequest("unknown appType") }
            return app
        }
        if let latest = try await store.devices(userID: userID).first, let app = config.app(latest.appType) {
            return app
        }
        return config.apps[0]
    }

    /// The master toggle, the app's keys in config order (true until saved), then the
    /// quiet-hours keys (with their defaults) when the app declares `quiet_hours` or
    /// the user saved one: the seed's answers for apps that never mention them.
    static func preferencesJSON(_ app: AppConfig, _ saved: [String: PreferenceValue]) -> JSON {
        var members: [(String, JSON)] = [(AppConfig.masterKey, .bool(saved[AppConfig.masterKey]?.bool ?? true))]
        for key in app.preferenceKeys { members.append((key, .bool(saved[key]?.bool ?? true))) }
        if app.quietHoursDeclared || QuietHours.keys.contains(where: { saved[$0] != nil }) {
            for key in QuietHours.keys {
                switch saved[key] ?? QuietHours.defaults[key]! {
                case .bool(let b): members.append((key, .bool(b)))
                case .text(let t): members.append((key, .string(t)))
                }
            }
        }
        return .object(members)
    }
}
