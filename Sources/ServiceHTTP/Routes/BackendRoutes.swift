import Hummingbird
import HummingbirdCore
import ServiceCore
import ServiceDelivery
import Store

/// The backend-facing API (an API key): registering for a user, sending a
/// notification, and reading the delivery log.
package struct BackendRoutes: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth
    let fanOut: FanOut
    let worker: WorkerWakeup

    package func register(on router: Router<ServiceContext>) {
        let read = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .read))
        let send = router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .send))
        let creating = send.group().add(middleware: IdempotencyKeyMiddleware())
        send.post("users/:user_id/device-tokens", use: registerDevice)
        creating.post("device-tokens", use: registerDevices)
        creating.post("notifications", use: notify)
        read.get("notifications/:id", use: notification)
        send.delete("notifications/:id", use: cancel)
        read.get("deliveries", use: delivery)
    }

    @Sendable func registerDevice(_ request: Request, context: ServiceContext) async throws -> Response {
        let userID = try context.pathUserID()
        let json = try await body.object(request)
        var companyID: String?
        if let c = json["company_id"], !c.isNull {
            guard let id = c.stringValue, Registration.isIdentifier(id) else {
                throw APIError.badRequest("company_id must be a string (1 to 256 characters)")
            }
            companyID = id
        }
        let device = try Registration.parse(json, userID: userID, companyID: companyID, config: config)
        try context.authorize(app: device.appType)
        try await Registration.store([device], in: store, config: config, now: clock.nowMillis)
        return JSONResponse.success(message: "Device token registered successfully")
    }

    /// Many users' tokens in one request (seeding, migrations from an old backend):
    /// `{"devices":[{"user_id","company_id"?, …the registration body}]}`, at most
    /// `maxBulkDevices`. All are checked first: one bad entry is a 400 and nothing is
    /// stored. Then all are stored in one transaction: a refused entry (409) or a
    /// store that fails (500) leaves none of them stored.
    @Sendable func registerDevices(_ request: Request, context: ServiceContext) async throws -> Response {
        let body = BodyReader(limit: Self.bulkBodyLimit(config), deadline: self.body.deadline)
        let json = try await body.object(request)
        guard case .array(let items)? = json["devices"], items.count <= Self.maxBulkDevices else {
            throw APIError.badRequest("devices must be a list of at most \(Self.maxBulkDevices) registrations")
        }
        var devices: [DeviceRegistration] = []
        devices.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            guard let userID = item["user_id"]?.stringValue, Registration.isIdentifier(userID) else {
                throw APIError.badRequest("devices[\(i)].user_id must be 1 to 256 characters")
            }
            // Absent or null: no company. Anything else but an id is a 400, not dropped:
            // the device would then miss every notification sent to its company.
            var companyID: String?
            if let c = item["company_id"], !c.isNull {
                guard let id = c.stringValue, Registration.isIdentifier(id) else {
                    throw APIError.badRequest("devices[\(i)].company_id must be a string (1 to 256 characters)")
                }
                companyID = id
            }
            do {
                devices.append(try Registration.parse(item, userID: userID, companyID: companyID, config: config))
            } catch {
                throw APIError.badRequest("devices[\(i)]: \(error.message)")
            }
        }
        // Every entry's app, before anything is stored: one outside the key's apps
        // is a 403 and none of the list is stored.
        for app in Set(devices.map(\.appType)).sorted() { try context.authorize(app: app) }
        context.audit.app = Set(devices.map(\.appType)).count == 1 ? devices.first?.appType : nil
        let devicesChecked = devices
        return try await idempotency.run(request, context: context, body: json) { _, _ in
            do {
                try await Registration.store(devicesChecked, in: store, config: config, now: clock.nowMillis, listed: true)
            } catch let error as StoreError {
                context.logger.error("bulk registration failed", metadata: ["error": "\(error)"])
                throw APIError(status: .internalServerError, message: "the devices could not be stored: the list is stored whole or not at all, so send it again whole")
            }
            return .init(status: .ok, body: .object([("success", .bool(true)), ("registered", .int(devicesChecked.count))]))
        }
    }

    static let maxBulkDevices = 1000
    /// Room for one entry of a bulk registration: one with every field at its
    /// longest (a 200-digit token, 256-byte ids and texts, unescaped) is under 1,800 bytes.
    static let bulkEntryBytes = 2048

    /// The bulk route's body limit: enough for `maxBulkDevices` entries, or the
    /// server's own limit when that is larger.
    static func bulkBodyLimit(_ config: ServerConfig) -> Int {
        max(config.maxBodyBytes, maxBulkDevices * bulkEntryBytes)
    }

    @Sendable func notify(_ request: Request, context: ServiceContext) async throws -> Response {
        let json = try await body.object(request)
        let checked = try fanOut.parse(json)
        try context.authorize(app: checked.app.appType)
        if let when = try Scheduling.when(json, now: clock.nowMillis, horizonDays: config.scheduleHorizonDays) {
            return try await idempotency.run(request, context: context, body: json) { id, resumed in
                try await schedule(id: id, resumed: resumed, kind: "notification", appType: checked.app.appType,
                                   type: checked.type, when: when, body: json)
            }
        }
        return try await idempotency.run(request, context: context, body: json) { id, resumed in
            // An earlier request with this key died after committing: what it made
            // stands. One that died while planning made nothing that stands.
            if resumed { try await fanOut.discardDeadPlan(id) }
            if resumed, let done = try await store.notification(id: id, limit: 1, after: nil) {
                let total = done.counts.values.reduce(0, +)
                return .init(status: .accepted, body: FanOut.Result(notificationID: id, deliveries: total,
                                                                    skippedPreferences: 0, skippedNoDevices: 0).json)
            }
            let result = try await fanOut.run(checked, notificationID: id)
            context.logger.info("notification accepted", metadata: [
                "notification_id": "\(result.notificationID)", "app": "\(checked.app.appType)", "type": "\(checked.type)",
                "deliveries": "\(result.deliveries)"])
            if result.deliveries > 0 { worker.wake() }
            return .init(status: .accepted, body: result.json)
        }
    }

    /// Stores a checked request to be sent at `when` (see `Scheduling`); the 202.
    func schedule(id: String, resumed: Bool, kind: String, appType: String, type: String, when: Scheduling.When,
                  body: JSON) async throws -> IdempotencyGate.Answer {
        // An earlier request with this key died after storing it: it stands.
        if resumed, let row = try await store.scheduled(id: id) {
            return .init(status: .accepted, body: Scheduling.accepted(id: id, when: when, superseded: nil)
                .with(state: row.state))
        }
        let superseded = try await store.schedule(
            NewSchedule(id: id, kind: kind, appType: appType, type: type, scheduleKey: when.scheduleKey,
                        request: Scheduling.stored(body).bytes, sendAt: when.sendAt),
            now: clock.nowMillis)
        return .init(status: .accepted, body: Scheduling.accepted(id: id, when: when, superseded: superseded))
    }

    /// `DELETE /v1/notifications/{id}`: what has not gone yet never goes. A scheduled
    /// notification not yet fanned out becomes `cancelled`. Of one fanned out, every
    /// delivery still waiting (due, held by quiet hours or a window, or back for a
    /// retry) becomes `cancelled`; what went already or a worker holds now is counted
    /// in the answer and left to finish.
    @Sendable func cancel(_ request: Request, context: ServiceContext) async throws -> Response {
        let id = try context.pathParameter("id")
        // Whose it is, before anything changes: another app's is a 403 and stays.
        guard let appType = try await Self.appType(ofNotification: id, in: store) else {
            throw APIError.notFound("notification not found")
        }
        try context.authorize(app: appType)
        let now = clock.nowMillis
        if let row = try await store.cancelSchedule(id: id, now: now) {
            switch row.state {
            case "cancelled": return JSONResponse.ok(Scheduling.json(row, now: now))
            case "sent": break
            case "superseded": throw APIError.conflict("the notification was superseded by \(row.supersededBy ?? "a newer one") (same schedule_key): cancel that one")
            case "failed": throw APIError.conflict("the notification failed at its time: \(row.error ?? "refused")")
            default: throw APIError.conflict("the notification is being fanned out right now: send the cancel again in a moment")
            }
        }
        guard let found = try await store.cancelDeliveries(notificationID: id, now: now) else {
            throw APIError.notFound("notification not found")
        }
        // Its deliveries are not all written yet: a cancel now would miss the rest.
        if found.planning {
            throw APIError.conflict("the notification is being fanned out right now: send the cancel again in a moment")
        }
        return JSONResponse.ok(.object([
            ("notification_id", .string(id)),
            ("cancelled", .int(found.cancelled)),
            ("already_sent", .int(found.alreadySent)),
            ("in_flight", .int(found.inFlight)),
        ]))
    }

    /// The app of a notification, scheduled or fanned out; nil when there is none.
    static func appType(ofNotification id: String, in store: any DeliveryStore) async throws -> String? {
        if let row = try await store.scheduled(id: id) { return row.schedule.appType }
        return try await store.notification(id: id, limit: 1, after: nil)?.appType
    }

    var idempotency: IdempotencyGate {
        IdempotencyGate(store: store, clock: clock, retentionHours: config.idempotencyRetentionHours)
    }

    /// Deliveries come a page at a time (`?limit=`, default 1,000, at most 10,000;
    /// `?after=` the previous page's `next`), so a 100k fan-out is never one answer;
    /// the summary always counts them all.
    static let defaultPageSize = 1_000
    static let maxPageSize = 10_000

    /// A list's `?limit=` (1 to `maxPageSize`, default `defaultPageSize`) and `?after=`
    /// (the previous page's `next`); a 400 naming the parameter otherwise.
    static func page(_ query: FlatDictionary<Substring, Substring>) throws(APIError) -> (limit: Int, after: Int64?) {
        let limit = try QueryNumbers.integer(query, "limit", in: 1...maxPageSize, default: defaultPageSize)
        guard let text = query["after"] else { return (limit, nil) }
        guard let after = QueryNumbers.digits(text) else { throw QueryNumbers.badCursor }
        return (limit, after)
    }

    @Sendable func notification(_ request: Request, context: ServiceContext) async throws -> Response {
        let id = try context.pathParameter("id")
        let query = request.uri.queryParameters
        let (limit, after) = try BackendRoutes.page(query)
        guard let appType = try await Self.appType(ofNotification: id, in: store) else {
            throw APIError.notFound("notification not found")
        }
        try context.authorize(app: appType)
        let body = try await BackendRoutes.notificationJSON(store, id: id, limit: limit, after: after, now: clock.nowMillis)
        guard let body else {
            // Scheduled: not fanned out yet, or never to be (cancelled, superseded).
            if let row = try await store.scheduled(id: id), row.state != "sent" {
                return JSONResponse.ok(Scheduling.json(row, now: clock.nowMillis))
            }
            throw APIError.notFound("notification not found")
        }
        return JSONResponse.ok(body)
    }

    static func notificationJSON(_ store: any DeliveryStore, id: String, limit: Int, after: Int64?,
                                 now: Int64) async throws -> JSON? {
        do {
            guard let view = try await store.notification(id: id, limit: limit, after: after) else { return nil }
            let engagement = try await store.notificationEngagement(notificationID: id, apnsIDs: view.deliveries.map(\.apnsID))
            let waits = try await Waiting.lookUp(view.deliveries, in: store, now: now)
            let content = try await store.notificationPayload(id: id).flatMap(NotificationContent.json(payload:))
            // A scheduled notification keeps the time it was asked for; it went at `sent_at`.
            let schedule = try await store.scheduled(id: id)
            return json(view, engagement: engagement, waits: waits, content: content, schedule: schedule)
        } catch {
            throw error
        }
    }

    // Built outside the async handler: Swift 6.3's optimizer crashed splitting the
    // handler's coroutine with this literal inside it (release builds only).
    static func json(_ view: NotificationView, engagement: NotificationEngagement = NotificationEngagement(),
                     waits: [String: Waiting] = [:], content: JSON? = nil, schedule: ScheduleRow? = nil) -> JSON {
        var members: [(String, JSON)] = [
            ("notification_id", .string(view.id)),
            ("type", .string(view.type)),
            ("entity_id", view.entityID.map(JSON.string) ?? .null),
            ("created_at", Timestamp.json(schedule?.createdAt ?? view.createdAt)),
            ("summary", summary(view.counts, engagement: engagement)),
            ("deliveries", .array(view.deliveries.map {
                BackendRoutes.json($0, reported: engagement.times[$0.apnsID], waiting: waits[$0.apnsID])
            })),
        ] + (view.next.map { [("next", JSON.string(String($0)))] } ?? [])
        if let content { members.append(("content", content)) }
        if let schedule {
            members.append(("send_at", Timestamp.json(schedule.schedule.sendAt)))
            members.append(("sent_at", Timestamp.json(view.createdAt)))
        }
        return .object(members)
    }

    /// A notification's deliveries counted by state (all of them, not one page's).
    static func summary(_ counts: [String: Int], engagement: NotificationEngagement = NotificationEngagement()) -> JSON {
        let delivered = counts["delivered", default: 0], failed = counts["failed", default: 0]
        let batched = counts["batched", default: 0], superseded = counts["superseded", default: 0]
        let cancelled = counts["cancelled", default: 0]
        let pending = counts.values.reduce(0, +) - delivered - failed - batched - superseded - cancelled
        var summary: [(String, JSON)] = [("pending", .int(pending)), ("delivered", .int(delivered)), ("failed", .int(failed))]
        // Only when there are some: a notification without quiet hours or batching
        // keeps the summary it always had (pending, delivered, failed).
        if batched > 0 { summary.append(("batched", .int(batched))) }
        if superseded > 0 { summary.append(("superseded", .int(superseded))) }
        if cancelled > 0 { summary.append(("cancelled", .int(cancelled))) }
        // What devices reported (receipts and opens), once any did.
        if engagement.received > 0 {
            summary.append(("received", .int(engagement.received)))
            summary.append(("opened", .int(engagement.opened)))
        }
        return .object(summary)
    }

    @Sendable func delivery(_ request: Request, context: ServiceContext) async throws -> Response {
        guard let apnsID = request.uri.queryParameters["apns_id"], !apnsID.isEmpty else {
            throw APIError.badRequest("apns_id is required")
        }
        guard let view = try await store.delivery(apnsID: String(apnsID).lowercased()) else {
            throw APIError.notFound("delivery not found")
        }
        try context.authorize(app: view.appType)
        let reported = try await store.notificationEngagement(notificationID: view.notificationID,
                                                              apnsIDs: [view.apnsID]).times[view.apnsID]
        let waiting = try await Waiting.lookUp([view], in: store, now: clock.nowMillis)[view.apnsID]
        guard case .object(let members) = BackendRoutes.json(view, reported: reported, waiting: waiting) else {
            return JSONResponse.ok(BackendRoutes.json(view))
        }
        return JSONResponse.ok(.object([("notification_id", .string(view.notificationID))] + members))
    }

    static func json(_ d: DeliveryView, reported: (receivedAt: Int64?, openedAt: Int64?)? = nil,
                     waiting: Waiting? = nil) -> JSON {
        var members: [(String, JSON)] = [
            ("user_id", .string(d.userID)),
            ("token", .string(d.token)),
            ("environment", .string(d.environment)),
            ("state", .string(d.state)),
            ("apns_id", .string(d.apnsID)),
            ("status", d.status.map(JSON.int) ?? .null),
            ("reason", d.reason.map(JSON.string) ?? .null),
            ("timestamp", Timestamp.json(d.timestamp)),
            ("attempts", .int(d.attempts)),
            ("finished_at", Timestamp.json(d.finishedAt)),
        ]
        // Quiet hours and batching, only where they apply.
        if let notBefore = d.notBefore { members.append(("not_before", Timestamp.json(notBefore))) }
        if let batched = d.batched { members.append(("batched", .int(batched))) }
        if let carrier = d.carriedBy { members.append(("carried_by", .string(carrier))) }
        // Receipts and opens, once the device reported one.
        if let reported {
            members.append(("received_at", Timestamp.json(reported.receivedAt)))
            members.append(("opened_at", Timestamp.json(reported.openedAt)))
        }
        // Why a pending one has not gone yet, and until when.
        if let waiting { members.append(("waiting", waiting.json)) }
        return .object(members)
    }
}
