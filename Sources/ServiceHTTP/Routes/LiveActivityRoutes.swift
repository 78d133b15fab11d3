import Hummingbird
import ServiceCore
import ServiceDelivery
import Store

/// Live Activities. App-facing (user JWT, only the user's own tokens):
/// register and unregister an activity's update token or a push-to-start token,
/// list them. Backend-facing (API key): register for a user, and send a start,
/// update or end through the outbox (`LiveActivitySend`).
package struct LiveActivityRoutes: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth
    let worker: WorkerWakeup

    package func register(on router: Router<ServiceContext>) {
        let app = router.group("api/user").add(middleware: UserAuthMiddleware(auth: auth))
        app.post("live-activity-token", use: registerToken)
        app.delete("live-activity-token", use: unregisterToken)
        app.get("live-activity-tokens", use: listTokens)
        let backend = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .send))
        backend.post("users/:user_id/live-activity-tokens", use: registerForUser)
        backend.group().add(middleware: IdempotencyKeyMiddleware()).post("live-activities", use: send)
    }

    /// `{pushToken, appType, attributesType, activityId?, environment?}`: with an
    /// `activityId` the token updates that running activity; without, it is the
    /// app's push-to-start token for `attributesType`.
    static func parse(_ body: JSON, userID: String, config: ServerConfig) throws(RequestError) -> LiveActivityRegistration {
        let token = try Registration.requiredToken(body, field: "pushToken")
        guard let appType = body["appType"]?.stringValue else { throw .invalid("appType is required") }
        guard config.app(appType) != nil else {
            throw .invalid("unknown appType; configured: \(config.apps.map(\.appType).joined(separator: ", "))")
        }
        guard let attributesType = body["attributesType"]?.stringValue, Registration.isIdentifier(attributesType) else {
            throw .invalid("attributesType is required (the ActivityAttributes type name)")
        }
        var kind = LiveActivityKind.start
        if let id = try LiveActivitySend.activityID(body, "activityId") {
            kind = .update(activityID: id)
        }
        var environment = "production"
        if let env = body["environment"], !env.isNull {
            guard let e = env.stringValue, e == "sandbox" || e == "production" else {
                throw .invalid("environment must be \"sandbox\" or \"production\"")
            }
            environment = e
        }
        return LiveActivityRegistration(userID: userID, token: token, appType: appType, kind: kind,
                                        attributesType: attributesType, environment: environment)
    }

    @Sendable func registerToken(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let registration = try Self.parse(try await body.object(request), userID: user.userID, config: config)
        try await save(registration)
        return JSONResponse.success(message: "Live Activity token registered successfully")
    }

    /// Stores a registration, the user keeping at most the configured number of
    /// active Live Activity tokens per app. 409: the activity is another user's (an
    /// activity belongs to the user who first registered it), or the token is a
    /// device token (one kind never becomes the other).
    func save(_ registration: LiveActivityRegistration) async throws {
        let refusal = try await store.registerLiveActivity(registration, maxActive: config.maxTokensPerUser,
                                                           now: clock.nowMillis)
        switch refusal?.reason {
        case nil: return
        case .activityOfAnotherUser?: throw APIError.conflict("activityId is registered to another user")
        case .otherKind?: throw APIError.conflict("pushToken is registered as a device token")
        }
    }

    @Sendable func unregisterToken(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let json = try await body.object(request)
        let token = try Registration.requiredToken(json, field: "pushToken")
        guard try await store.unregisterLiveActivity(userID: user.userID, token: token, now: clock.nowMillis) else {
            throw APIError.notFound("Live Activity token not found")
        }
        return JSONResponse.success(message: "Live Activity token unregistered successfully")
    }

    @Sendable func listTokens(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let rows = try await store.liveActivityTokens(userID: user.userID)
        return JSONResponse.ok(.object([("success", .bool(true)), ("tokens", .array(rows.map(Self.json)))]))
    }

    static func json(_ t: LiveActivityToken) -> JSON {
        let (kind, activity): (String, JSON) = switch t.kind {
        case .update(let id): ("update", .string(id))
        case .start: ("start", .null)
        }
        return .object([
            ("id", .int64(t.id)),
            ("kind", .string(kind)),
            ("app_type", .string(t.appType)),
            ("attributes_type", .string(t.attributesType)),
            ("activity_id", activity),
            ("environment", .string(t.environment)),
            ("last_used_at", Timestamp.json(t.lastUsedAt)),
            ("created_at", Timestamp.json(t.createdAt)),
        ])
    }

    @Sendable func registerForUser(_ request: Request, context: ServiceContext) async throws -> Response {
        let userID = try context.pathUserID()
        let registration = try Self.parse(try await body.object(request), userID: userID, config: config)
        try context.authorize(app: registration.appType)
        try await save(registration)
        return JSONResponse.success(message: "Live Activity token registered successfully")
    }

    @Sendable func send(_ request: Request, context: ServiceContext) async throws -> Response {
        let sender = LiveActivitySend(config: config, store: store, clock: clock)
        let json = try await body.object(request)
        let checked = try sender.parse(json)
        try context.authorize(app: checked.app.appType)
        let gate = IdempotencyGate(store: store, clock: clock, retentionHours: config.idempotencyRetentionHours)
        if let when = try Scheduling.when(json, now: clock.nowMillis, horizonDays: config.scheduleHorizonDays) {
            return try await gate.run(request, context: context, body: json) { id, resumed in
                if resumed, let row = try await store.scheduled(id: id) {
                    return .init(status: .accepted, body: Scheduling.accepted(id: id, when: when, superseded: nil)
                        .with(state: row.state))
                }
                let superseded = try await store.schedule(
                    NewSchedule(id: id, kind: "live_activity", appType: checked.app.appType,
                                type: "live_activity.\(checked.event.rawValue)", scheduleKey: when.scheduleKey,
                                request: Scheduling.stored(json).bytes, sendAt: when.sendAt),
                    now: clock.nowMillis)
                return .init(status: .accepted, body: Scheduling.accepted(id: id, when: when, superseded: superseded))
            }
        }
        return try await gate
            .run(request, context: context, body: json) { id, resumed in
                // An earlier request with this key died after committing: what it made stands.
                if resumed, let done = try await store.notification(id: id, limit: 1, after: nil) {
                    return .init(status: .accepted, body: .object([("notification_id", .string(id)),
                                                                   ("deliveries", .int(done.counts.values.reduce(0, +)))]))
                }
                let result = try await sender.run(checked, notificationID: id)
                if result.deliveries > 0 { worker.wake() }
                return .init(status: .accepted, body: result.json)
            }
    }
}
