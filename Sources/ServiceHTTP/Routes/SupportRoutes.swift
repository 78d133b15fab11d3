import Foundation
import Hummingbird
import HummingbirdCore
import ServiceCore
import ServiceDelivery
import Store

/// What support needs when a customer says "I never got the notification", on the
/// backend API (an API key), so the console and a backend's own tools read the
/// same documented routes: a user's devices (whatever their state), preferences
/// and deliveries; the recent notifications; the tokens deactivated lately; a test
/// push to one device; and this process's outcomes second by second.
package struct SupportRoutes: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth
    let metrics: ServiceMetrics
    let worker: WorkerWakeup

    package func register(on router: Router<ServiceContext>) {
        let read = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .read))
        read.get("users/:user_id/device-tokens", use: devices)
        read.get("users/:user_id/push-preferences", use: preferences)
        read.get("users/:user_id/deliveries", use: deliveries)
        read.get("notifications", use: notifications)
        read.get("scheduled-notifications", use: scheduled)
        read.get("deactivated-device-tokens", use: deactivated)
        read.get("stats/deliveries", use: stats)
        router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .testPush))
            .post("users/:user_id/test-push", use: testPush)
    }

    /// Lists that count each item's deliveries take at most this many a page.
    static let defaultSummaryPage = 50
    static let maxSummaryPage = 500
    /// `deactivated-device-tokens`' window, in hours: a week unless asked.
    static let defaultDeactivatedHours = 168
    static let maxDeactivatedHours = 24 * 90

    @Sendable func devices(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.pathUserID()
        // A key limited to some apps sees only those apps' tokens.
        let rows = try await store.userDevices(userID: user).filter { context.sees(app: $0.appType) }
        return JSONResponse.ok(.object([("user_id", .string(user)), ("tokens", .array(rows.map(Self.json)))]))
    }

    @Sendable func preferences(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.pathUserID()
        var apps = config.apps.filter { context.sees(app: $0.appType) }
        if let name = request.uri.queryParameters["app_type"] {
            guard let app = config.app(String(name)) else { throw APIError.badRequest("unknown app_type") }
            try context.authorize(app: app.appType)
            apps = [app]
        }
        var members: [(String, JSON)] = []
        var anySaved = false
        for app in apps {
            let saved = try await store.preferences(userID: user, appType: app.appType)
            anySaved = anySaved || !saved.isEmpty
            members.append((app.appType, UserRoutes.preferencesJSON(app, saved)))
        }
        // Unsaved preferences read as the defaults: `saved` tells them apart from a
        // user who chose those values (and, with no token and no delivery, from an
        // id the server has never seen).
        return JSONResponse.ok(.object([("user_id", .string(user)), ("preferences", .object(members)),
                                        ("saved", .bool(anySaved))]))
    }

    @Sendable func deliveries(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.pathUserID()
        let (limit, after) = try Self.page(request.uri.queryParameters)
        let before: Int64?
        if let after {
            guard let n = QueryNumbers.digits(Substring(after)), n > 0 else { throw QueryNumbers.badCursor }
            before = n
        } else {
            before = nil
        }
        let page = try await store.userDeliveries(userID: user, limit: limit, before: before)
        let waits = try await Waiting.lookUp(page.items, in: store, now: clock.nowMillis)
        // A page may come back short for a key limited to some apps; `next` still
        // follows the whole log, so the pages add up.
        let items: [JSON] = page.items.filter { context.sees(app: $0.appType) }.map { d in
            guard case .object(let members) = BackendRoutes.json(d, waiting: waits[d.apnsID]) else { return .null }
            return .object([("notification_id", .string(d.notificationID))] + members)
        }
        return JSONResponse.ok(.object([("user_id", .string(user)), ("deliveries", .array(items))]
            + (page.next.map { [("next", JSON.string(String($0)))] } ?? [])))
    }

    @Sendable func notifications(_ request: Request, context: ServiceContext) async throws -> Response {
        let (limit, after) = try Self.page(request.uri.queryParameters)
        let page = try await store.recentNotifications(limit: limit, before: try Self.cursor(after))
        let items: [JSON] = page.items.filter { context.sees(app: $0.appType) }.map { n -> JSON in
            JSON.object([
                ("notification_id", .string(n.id)),
                ("type", .string(n.type)),
                ("app_type", .string(n.appType)),
                ("entity_id", n.entityID.map(JSON.string) ?? .null),
                ("created_at", Timestamp.json(n.createdAt)),
                ("summary", BackendRoutes.summary(n.counts)),
            ])
        }
        return JSONResponse.ok(.object([("notifications", .array(items))]
            + (page.next.map { [("next", JSON.string($0.text))] } ?? [])))
    }

    /// `?app_type=` (one app, else all), `?limit=`, `?after=`: the scheduled
    /// notifications still to go, soonest first; each is cancelled with
    /// `DELETE /v1/notifications/{id}`.
    @Sendable func scheduled(_ request: Request, context: ServiceContext) async throws -> Response {
        let query = request.uri.queryParameters
        let (limit, after) = try Self.page(query)
        var appType: String?
        if let name = query["app_type"] {
            guard config.app(String(name)) != nil else { throw APIError.badRequest("unknown app_type") }
            try context.authorize(app: String(name))
            appType = String(name)
        }
        let page = try await store.upcomingSchedules(appType: appType, limit: limit, after: try Self.cursor(after))
        let now = clock.nowMillis
        let items = page.items.filter { context.sees(app: $0.schedule.appType) }
        return JSONResponse.ok(.object([("notifications", .array(items.map { Scheduling.listItem($0, now: now) }))]
            + (page.next.map { [("next", JSON.string($0.text))] } ?? [])))
    }

    @Sendable func deactivated(_ request: Request, context: ServiceContext) async throws -> Response {
        let query = request.uri.queryParameters
        let (limit, after) = try Self.page(query)
        let hours = try QueryNumbers.integer(query, "hours", in: 1...Self.maxDeactivatedHours,
                                             default: Self.defaultDeactivatedHours)
        let since = clock.nowMillis - Int64(hours) * 3_600_000
        let page = try await store.deactivatedDevices(since: since, limit: limit, before: try Self.cursor(after))
        let tokens = page.items.filter { context.sees(app: $0.appType) }
        return JSONResponse.ok(.object([("hours", .int(hours)), ("tokens", .array(tokens.map(Self.json)))]
            + (page.next.map { [("next", JSON.string($0.text))] } ?? [])))
    }

    /// `{"device_id": N, "alert"?: "text"}`: one alert to one of the user's active iOS
    /// tokens, through the outbox like any notification (type `test`), so its answer
    /// is in the log: `GET /v1/deliveries?apns_id=` shows it arrive.
    @Sendable func testPush(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.pathUserID()
        let json = try await body.object(request)
        guard case .object(let members) = json else { throw APIError.badRequest("the body must be a JSON object") }
        for (key, _) in members where key != "device_id" && key != "alert" {
            throw APIError.badRequest("unknown field '\(key)' (device_id, alert)")
        }
        guard let deviceID = json["device_id"]?.intValue else {
            throw APIError.badRequest("device_id must be the id of one of the user's device tokens")
        }
        var text = Self.defaultTestAlert
        if let alert = json["alert"], !alert.isNull {
            guard let s = alert.stringValue, (1...256).contains(s.utf8.count),
                  !s.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
                throw APIError.badRequest("alert must be 1 to 256 bytes of text without control characters")
            }
            text = s
        }
        guard let device = try await store.userDevices(userID: user).first(where: { $0.id == Int64(deviceID) }) else {
            throw APIError.notFound("device token not found")
        }
        try context.authorize(app: device.appType)
        guard device.isActive else {
            throw APIError.conflict("the device token is not active (\(device.deactivatedReason ?? "deactivated"))")
        }
        guard device.platform == "ios", config.app(device.appType) != nil else {
            throw APIError.conflict("only an iOS token of a configured app can be sent to")
        }
        let payload = JSON.object([
            ("aps", .object([("alert", .object([("title", .string("Test notification")), ("body", .string(text))]))])),
            ("type", .string(Self.testType)),
        ]).bytes
        var ids = APNsIDs()
        let notification = NewNotification(id: UUID().uuidString.lowercased(), type: Self.testType, entityType: nil,
                                           entityID: nil, appType: device.appType)
        let delivery = NewDelivery(userID: user, deviceID: device.id, token: device.token,
                                   environment: device.environment, apnsID: ids.next(), payload: payload)
        try await store.enqueue(notification, [delivery], now: clock.nowMillis)
        context.audit.target = notification.id
        metrics.notification(app: device.appType, deliveries: 1)
        worker.wake()
        return JSONResponse.make(.accepted, .object([
            ("notification_id", .string(notification.id)),
            ("apns_id", .string(delivery.apnsID)),
            ("device_id", .int64(device.id)),
        ]))
    }

    static let testType = "test"
    static let defaultTestAlert = "Sent from the apns-server console"

    /// `?seconds=` (1 to 3600, default 3600): this process's final outcomes, a count a
    /// second, oldest first and ending now; failures by APNs' reason over the window.
    @Sendable func stats(_ request: Request, context: ServiceContext) async throws -> Response {
        // This process's counts over every app.
        try context.authorizeAllApps()
        let seconds = try QueryNumbers.integer(request.uri.queryParameters, "seconds", in: 1...DeliveryRates.seconds,
                                               default: DeliveryRates.seconds)
        let s = metrics.rates.snapshot(seconds: seconds)
        let reasons = s.failedByReason.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        return JSONResponse.ok(.object([
            ("end", Timestamp.json(s.end * 1000)),
            ("seconds", .int(seconds)),
            ("delivered", .array(s.delivered.map(JSON.int))),
            ("failed", .array(s.failed.map(JSON.int))),
            ("failed_by_reason", .object(reasons.map { ($0.key, JSON.int($0.value)) })),
        ]))
    }

    /// `?limit=` (1 to `maxSummaryPage`, default `defaultSummaryPage`) and `?after=`
    /// (the previous page's `next`, as text); a 400 naming the parameter otherwise.
    static func page(_ query: FlatDictionary<Substring, Substring>) throws(APIError) -> (limit: Int, after: String?) {
        let limit = try QueryNumbers.integer(query, "limit", in: 1...maxSummaryPage, default: defaultSummaryPage)
        return (limit, query["after"].map(String.init))
    }

    static func cursor(_ after: String?) throws(APIError) -> TimeCursor? {
        guard let after else { return nil }
        guard let cursor = TimeCursor(text: after), cursor.id.utf8.count <= 256 else {
            throw QueryNumbers.badCursor
        }
        return cursor
    }

    static func json(_ d: UserDevice) -> JSON {
        .object([
            ("id", .int64(d.id)),
            ("user_id", .string(d.userID)),
            ("app_type", .string(d.appType)),
            ("platform", .string(d.platform)),
            ("environment", .string(d.environment)),
            ("token", .string(d.token)),
            ("device_name", d.deviceName.map(JSON.string) ?? .null),
            ("os_version", d.osVersion.map(JSON.string) ?? .null),
            ("app_version", d.appVersion.map(JSON.string) ?? .null),
            ("active", .bool(d.isActive)),
            ("deactivated_reason", d.deactivatedReason.map(JSON.string) ?? .null),
            ("deactivated_at", Timestamp.json(d.deactivatedAt)),
            ("last_used_at", Timestamp.json(d.lastUsedAt)),
            ("registered_at", Timestamp.json(d.registeredAt)),
            ("created_at", Timestamp.json(d.createdAt)),
        ])
    }
}
