import APNs
import Foundation
import Hummingbird
import ServiceCore
import ServiceDelivery
import Store

/// Broadcast channels (iOS 18), one per app, environment and entity. Backend-facing
/// (API key): create (idempotent: the same key answers the channel it has), list,
/// read, delete (on APNs, then in the store), broadcast to an entity's channel
/// (recorded, then sent by `BroadcastWorker`) and read a broadcast's log entry.
/// App-facing (user JWT): the channel id of an entity, so the app can subscribe
/// its Live Activity to it, only when the backend put the user in the channel's
/// audience (`ChannelAudience`).
///
/// APNs' refusals (`CannotCreateChannelConfig`, `FeatureNotEnabled`, ...) are 502
/// with APNs' reason and status; no answer from APNs is 503. Neither stores anything.
package struct ChannelRoutes: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth
    let broadcasts: Broadcasts
    let worker: WorkerWakeup

    package func register(on router: Router<ServiceContext>) {
        let reading = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .read))
        let sending = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .send))
        let creating = sending.group().add(middleware: IdempotencyKeyMiddleware())
        creating.post("channels", use: create)
        reading.get("channels", use: list)
        reading.get("channels/:app_type/:entity_type/:entity_id", use: read)
        sending.delete("channels/:app_type/:entity_type/:entity_id", use: delete)
        creating.post("channels/:app_type/:entity_type/:entity_id/broadcasts", use: broadcast)
        reading.get("broadcasts/:id", use: broadcastLog)
        let app = router.group("api/user").add(middleware: UserAuthMiddleware(auth: auth))
        app.get("live-activity-channel", use: channelForApp)
    }

    // MARK: Backend

    @Sendable func create(_ request: Request, context: ServiceContext) async throws -> Response {
        let json = try await body.object(request)
        guard let appType = json["app_type"]?.stringValue else { throw APIError.badRequest("app_type is required") }
        let key = try Self.key(appType: appType, entityType: json["entity_type"]?.stringValue,
                               entityID: json["entity_id"]?.stringValue, environment: json["environment"], config: config)
        try context.authorize(app: key.appType)
        var policy = MessageStoragePolicy.mostRecentMessageStored
        if let p = json["storage_policy"], !p.isNull {
            guard let n = p.intValue, let known = MessageStoragePolicy(rawValue: n) else {
                throw APIError.badRequest("storage_policy must be 0 (no message stored) or 1 (the most recent stored)")
            }
            policy = known
        }
        let audience = try Self.audience(json["audience"])
        let client = try client(key)
        return try await idempotency.run(request, context: context, body: json) { _, _ in
            try await broadcasts.creatingChannel(key) { () async throws -> IdempotencyGate.Answer in
                if let existing = try await store.channel(key) {
                    if let audience { _ = try await store.setChannelAudience(key, audience) }
                    return .init(status: .ok, body: Self.json(existing, created: false))
                }
                let result = await client.createChannel(storagePolicy: policy)
                guard result.isSuccess, let channelID = result.channelID else {
                    return Self.refusalAnswer(result.status, result.reason, result.error, doing: "create the channel")
                }
                let stored: ChannelRow
                do {
                    stored = try await store.addChannel(ChannelRow(key: key, channelID: channelID, storagePolicy: policy.rawValue,
                                                                   createdAt: clock.nowMillis), audience: audience)
                } catch {
                    // Nothing half-made: the channel the store could not keep goes too.
                    _ = await client.deleteChannel(channelID)
                    throw error
                }
                guard stored.channelID == channelID else {
                    // Another instance stored one for this key first: keep that one only.
                    _ = await client.deleteChannel(channelID)
                    return .init(status: .ok, body: Self.json(stored, created: false))
                }
                return .init(status: .created, body: Self.json(stored, created: true))
            }
        }
    }

    var idempotency: IdempotencyGate {
        IdempotencyGate(store: store, clock: clock, retentionHours: config.idempotencyRetentionHours)
    }

    @Sendable func list(_ request: Request, context: ServiceContext) async throws -> Response {
        let q = request.uri.queryParameters
        guard let appType = q["app_type"].map(String.init) else { throw APIError.badRequest("app_type is required") }
        guard config.app(appType) != nil else { throw APIError.badRequest("unknown app_type '\(appType)'") }
        try context.authorize(app: appType)
        let environment = q["environment"].map(String.init)
        if let environment, environment != "sandbox" && environment != "production" {
            throw APIError.badRequest("environment must be \"sandbox\" or \"production\"")
        }
        let rows = try await store.channels(appType: appType, environment: environment,
                                            entityType: q["entity_type"].map(String.init))
        return JSONResponse.ok(.object([("channels", .array(rows.map { Self.json($0, created: nil) }))]))
    }

    @Sendable func read(_ request: Request, context: ServiceContext) async throws -> Response {
        let key = try pathKey(request, context)
        guard let row = try await store.channel(key) else { throw APIError.notFound("channel not found") }
        return JSONResponse.ok(Self.json(row, created: nil))
    }

    @Sendable func delete(_ request: Request, context: ServiceContext) async throws -> Response {
        let key = try pathKey(request, context)
        let client = try client(key)
        guard let row = try await store.channel(key) else { throw APIError.notFound("channel not found") }
        let result = await client.deleteChannel(row.channelID)
        // Gone on APNs already (deleted elsewhere, or the environment was reset): the
        // store follows.
        guard result.isSuccess || result.reason == .channelNotRegistered else {
            return Self.refusal(result.status, result.reason, result.error, doing: "delete the channel")
        }
        _ = try await store.removeChannel(key, channelID: row.channelID)
        guard case .object(let members) = Self.json(row, created: nil) else { fatalError("a channel is an object") }
        return JSONResponse.ok(.object([("deleted", .bool(true))] + members))
    }

    /// `{event: update|end, content_state, timestamp?, stale_date?, dismissal_date?,
    /// relevance_score?, alert?, priority? (10, 5 or 1), expiration?}` to the entity's
    /// channel; 202 once recorded.
    @Sendable func broadcast(_ request: Request, context: ServiceContext) async throws -> Response {
        let json = try await body.object(request)
        let key = try pathKey(request, context, environment: json["environment"])
        _ = try client(key)
        guard let name = json["event"]?.stringValue else { throw APIError.badRequest("event is required (update or end)") }
        guard let event = LiveActivityEvent(rawValue: name), event != .start else {
            throw APIError.badRequest("event must be update or end (a broadcast cannot start an activity)")
        }
        let timestamp = try LiveActivitySend.seconds(json, "timestamp") ?? clock.nowSeconds
        let contentState = try LiveActivitySend.object(json, "content_state")
        let staleDate = try LiveActivitySend.seconds(json, "stale_date")
        let dismissalDate = try LiveActivitySend.seconds(json, "dismissal_date")
        let relevanceScore = try LiveActivitySend.number(json, "relevance_score")
        let alert = try LiveActivitySend.alert(json)
        let activity: LiveActivity
        do throws(LiveActivity.Error) {
            activity = try LiveActivity(event: event, timestamp: timestamp, contentState: contentState,
                                        staleDate: staleDate, dismissalDate: dismissalDate,
                                        relevanceScore: relevanceScore, alert: alert)
        } catch {
            throw APIError.badRequest(error.description)
        }
        var priority = 10
        if let p = json["priority"], !p.isNull {
            guard let n = p.intValue, [10, 5, 1].contains(n) else { throw APIError.badRequest("priority must be 10, 5 or 1") }
            priority = n
        }
        let expiration = try LiveActivitySend.seconds(json, "expiration") ?? 0
        guard let channel = try await store.channel(key) else { throw APIError.notFound("channel not found") }
        if channel.storagePolicy == MessageStoragePolicy.noMessageStored.rawValue, expiration != 0 {
            throw APIError.badRequest("this channel stores no message: expiration must be 0")
        }
        let payload = Payload(aps: APS(liveActivity: activity))
        do {
            _ = try BroadcastNotification(priority: Priority(rawValue: priority),
                                          expiration: expiration == 0 ? .immediately : .at(unixSeconds: expiration),
                                          payload: payload)
        } catch {
            throw APIError.badRequest(error.description)
        }
        let bytes = payload.bytes
        return try await idempotency.run(request, context: context, body: json) { id, resumed in
            // An earlier request with this key died after recording it: it stands.
            let recorded = resumed ? try await store.broadcast(id: id) != nil : false
            if !recorded {
                try await store.enqueueBroadcast(NewBroadcast(id: id, channel: channel, payload: bytes, priority: priority,
                                                              expiration: expiration), now: clock.nowMillis)
                worker.wake()
            }
            return .init(status: .accepted, body: .object([("broadcast_id", .string(id)),
                                                           ("channel_id", .string(channel.channelID))]))
        }
    }

    @Sendable func broadcastLog(_ request: Request, context: ServiceContext) async throws -> Response {
        let id = try context.pathParameter("id")
        guard let b = try await store.broadcast(id: id) else { throw APIError.notFound("broadcast not found") }
        try context.authorize(app: b.key.appType)
        return JSONResponse.ok(.object([
            ("broadcast_id", .string(b.id)),
            ("app_type", .string(b.key.appType)),
            ("environment", .string(b.key.environment)),
            ("entity_type", .string(b.key.entityType)),
            ("entity_id", .string(b.key.entityID)),
            ("channel_id", .string(b.channelID)),
            ("state", .string(b.state)),
            ("status", b.status.map(JSON.int) ?? .null),
            ("reason", b.reason.map(JSON.string) ?? .null),
            ("apns_request_id", b.requestID.map(JSON.string) ?? .null),
            ("apns_unique_id", b.uniqueID.map(JSON.string) ?? .null),
            ("attempts", .int(b.attempts)),
            ("created_at", Timestamp.json(b.createdAt)),
            ("finished_at", Timestamp.json(b.finishedAt)),
        ]))
    }

    // MARK: App

    /// `?appType=&entityType=&entityId=[&environment=]`: `{"success":true,"channelId":"…"}`.
    @Sendable func channelForApp(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let q = request.uri.queryParameters
        guard let appType = q["appType"].map(String.init) else { throw APIError.badRequest("appType is required") }
        let key = try Self.key(appType: appType, entityType: q["entityType"].map(String.init),
                               entityID: q["entityId"].map(String.init),
                               environment: q["environment"].map { JSON.string(String($0)) }, config: config,
                               names: ("entityType", "entityId"))
        // A channel that is not the user's answers as one that does not exist: the
        // answer tells nothing of which entities have channels.
        guard let row = try await store.channel(key, visibleTo: user.userID, companyID: user.companyID) else {
            throw APIError.notFound("channel not found")
        }
        return JSONResponse.ok(.object([("success", .bool(true)), ("channelId", .string(row.channelID))]))
    }

    // MARK: Helpers

    static let maxAudienceUsers = 10_000

    /// A create's `audience`: `{"public": true}` (every app user), or
    /// `{"users": [ids], "company_id": id}` (either or both). Absent (nil): a new
    /// channel has none, so only the backend reads it; an existing one keeps its own.
    static func audience(_ value: JSON?) throws(APIError) -> ChannelAudience? {
        guard let value, !value.isNull else { return nil }
        let usage = #"audience must be {"public": true} or {"users": [user ids], "company_id": "id"}"#
        guard case .object(let members) = value else { throw .badRequest(usage) }
        var audience = ChannelAudience.nobody
        for (name, member) in members {
            switch name {
            case "public":
                guard let flag = member.boolValue else { throw .badRequest("audience.public must be true or false") }
                audience.isPublic = flag
            case "users":
                guard case .array(let items) = member, items.count <= maxAudienceUsers else {
                    throw .badRequest("audience.users must be a list of at most \(maxAudienceUsers) user ids")
                }
                for item in items {
                    guard let id = item.stringValue, Registration.isIdentifier(id) else {
                        throw .badRequest("audience.users must hold user ids (1 to 256 characters)")
                    }
                    audience.userIDs.append(id)
                }
            case "company_id":
                guard member.isNull || member.stringValue.map(Registration.isIdentifier) == true else {
                    throw .badRequest("audience.company_id must be a company id (1 to 256 characters)")
                }
                audience.companyID = member.stringValue
            default:
                throw .badRequest(usage)
            }
        }
        if audience.isPublic, !audience.userIDs.isEmpty || audience.companyID != nil {
            throw .badRequest("audience: a public channel names no users or company")
        }
        return audience
    }

    static func key(appType: String, entityType: String?, entityID: String?, environment: JSON?, config: ServerConfig,
                    names: (String, String) = ("entity_type", "entity_id")) throws(APIError) -> ChannelKey {
        guard config.app(appType) != nil else { throw .badRequest("unknown app_type '\(appType)'") }
        guard let entityType, Registration.isIdentifier(entityType) else {
            throw .badRequest("\(names.0) is required (1 to 256 characters)")
        }
        guard let entityID, Registration.isIdentifier(entityID) else {
            throw .badRequest("\(names.1) is required (1 to 256 characters)")
        }
        var env = "production"
        if let e = environment, !e.isNull {
            guard let s = e.stringValue, s == "sandbox" || s == "production" else {
                throw .badRequest("environment must be \"sandbox\" or \"production\"")
            }
            env = s
        }
        return ChannelKey(appType: appType, environment: env, entityType: entityType, entityID: entityID)
    }

    func pathKey(_ request: Request, _ context: ServiceContext, environment: JSON? = nil) throws(APIError) -> ChannelKey {
        let env = environment ?? request.uri.queryParameters["environment"].map { JSON.string(String($0)) }
        let key = try Self.key(appType: context.pathParameter("app_type"),
                               entityType: context.pathParameter("entity_type"),
                               entityID: context.pathParameter("entity_id"), environment: env, config: config)
        // Every route with a channel in its path acts for that channel's app.
        try context.authorize(app: key.appType)
        return key
    }

    func client(_ key: ChannelKey) throws(APIError) -> BroadcastClient {
        guard let client = broadcasts.client(appType: key.appType, environment: key.environment) else {
            throw .badRequest("app \(key.appType) has no broadcast client")
        }
        return client
    }

    static func json(_ c: ChannelRow, created: Bool?) -> JSON {
        var members: [(String, JSON)] = [
            ("channel_id", .string(c.channelID)),
            ("app_type", .string(c.key.appType)),
            ("environment", .string(c.key.environment)),
            ("entity_type", .string(c.key.entityType)),
            ("entity_id", .string(c.key.entityID)),
            ("storage_policy", .int(c.storagePolicy)),
            ("created_at", Timestamp.json(c.createdAt)),
        ]
        if let created { members.append(("created", .bool(created))) }
        return .object(members)
    }

    /// APNs said no (502, with its reason), or said nothing (503).
    static func refusal(_ status: Int, _ reason: Reason?, _ error: String?, doing: String) -> Response {
        let answer = refusalAnswer(status, reason, error, doing: doing)
        return JSONResponse.make(answer.status, answer.body)
    }

    static func refusalAnswer(_ status: Int, _ reason: Reason?, _ error: String?, doing: String) -> IdempotencyGate.Answer {
        let answered = status != 0 || reason != nil
        let message = answered
            ? "APNs refused to \(doing): \(reason?.rawValue ?? "status \(status)")"
            : "no answer from APNs to \(doing): \(error ?? "unreachable")"
        return IdempotencyGate.Answer(status: answered ? .badGateway : .serviceUnavailable, body: .object([
            ("success", .bool(false)),
            ("error", .string(message)),
            ("reason", reason.map { JSON.string($0.rawValue) } ?? .null),
            ("apns_status", status != 0 ? .int(status) : .null),
        ]))
    }
}
