import APNs
import Foundation
import ServiceCore
import Store

/// `POST /v1/notifications`: who gets what. A request is checked whole before
/// anything is stored (a 400 leaves no trace), then every targeted user's active
/// iOS tokens of the app whose preferences allow the type get one delivery each,
/// with its apns-id chosen now, and all of it is committed before the answer:
/// written in parts, sent whole or not at all (see `run`).
package struct FanOut: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock
    let metrics: ServiceMetrics
    /// This process's worker loops, given the fresh deliveries directly (see `Handoff`).
    var handoff: (any DeliveryHandoff)? = nil

    package init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock, metrics: ServiceMetrics,
                 handoff: (any DeliveryHandoff)? = nil) {
        self.config = config
        self.store = store
        self.clock = clock
        self.metrics = metrics
        self.handoff = handoff
    }

    /// A checked request.
    package struct Request: Sendable {
        package var type: String
        var entityType: String?
        var entityID: String?
        package var app: AppConfig
        var audience: Audience
        var alert: JSON?
        var badge: Badge
        var sound: JSON?
        var mutableContent: Bool
        var threadID: String?
        var data: [(String, JSON)]
        var collapseID: String?
        var priority: Int?
        var expiration: Int64?
        /// From a named priority (`NamedPriority`): the alert's interruption level.
        var interruptionLevel: String?
        /// `"priority":"critical"`, or a type the app marks critical: quiet hours let it through.
        var critical = false
        /// For a batching summary's `{entity_title}`; sent in the payload as `entity_title`.
        var entityTitle: String?

        enum Badge: Sendable {
            case none
            case all(Int)
            case perUser([String: Int])
        }
    }

    package struct Result: Sendable {
        package let notificationID: String
        package let deliveries: Int
        let skippedPreferences: Int
        let skippedNoDevices: Int

        package init(notificationID: String, deliveries: Int, skippedPreferences: Int, skippedNoDevices: Int) {
            self.notificationID = notificationID
            self.deliveries = deliveries
            self.skippedPreferences = skippedPreferences
            self.skippedNoDevices = skippedNoDevices
        }

        package var json: JSON {
            .object([
                ("notification_id", .string(notificationID)),
                ("deliveries", .int(deliveries)),
                ("skipped", .object([("preferences", .int(skippedPreferences)), ("no_devices", .int(skippedNoDevices))])),
            ])
        }
    }

    static let reservedKeys: Set = ["aps", "type", "entity_type", "entity_id", "entity_title"]
    static let maxUsers = 10_000

    /// A request's `user_ids`: 1 to `maxUsers` identifiers, repeats dropped, in order.
    static func userIDs(_ ids: JSON) throws(RequestError) -> [String] {
        guard case .array(let items) = ids, !items.isEmpty, items.count <= FanOut.maxUsers else {
            throw .invalid("user_ids must be a non-empty list of at most \(FanOut.maxUsers) user ids")
        }
        var seen = Set<String>(), ordered: [String] = []
        for item in items {
            guard let id = item.stringValue, Registration.isIdentifier(id) else {
                throw .invalid("user_ids must hold strings (1 to 256 characters)")
            }
            if seen.insert(id).inserted { ordered.append(id) }
        }
        return ordered
    }

    package func parse(_ body: JSON) throws(RequestError) -> Request {
        guard let type = body["type"]?.stringValue, Registration.isIdentifier(type), type.utf8.count <= 64 else {
            throw .invalid("type is required (a string of 1 to 64 characters)")
        }
        guard let appType = body["app_type"]?.stringValue else { throw .invalid("app_type is required") }
        guard let app = config.app(appType) else { throw .invalid("unknown app_type '\(appType)'") }
        let entityType = try optionalString(body, "entity_type")
        let entityID = try optionalString(body, "entity_id")
        let entityTitle = try optionalString(body, "entity_title")

        let userIDs = body["user_ids"].flatMap { $0.isNull ? nil : $0 }
        let companyID = body["company_id"].flatMap { $0.isNull ? nil : $0 }
        let audience: Audience
        switch (userIDs, companyID) {
        case (nil, nil): throw .invalid("one of user_ids or company_id is required")
        case (.some, .some): throw .invalid("give user_ids or company_id, not both")
        case (let ids?, nil):
            audience = .users(try FanOut.userIDs(ids))
        case (nil, let company?):
            guard let id = company.stringValue, Registration.isIdentifier(id) else {
                throw .invalid("company_id must be a string (1 to 256 characters)")
            }
            audience = .company(id)
        }

        var alert: JSON?
        if let a = body["alert"], !a.isNull {
            switch a {
            case .string: alert = a
            case .object(let members):
                for (key, value) in members {
                    guard case .string = value else {
                        if key.hasSuffix("-args"), case .array = value { continue }
                        throw .invalid("alert.\(key) must be a string")
                    }
                }
                alert = a
            default: throw .invalid("alert must be an object ({\"title\",\"body\"}) or a string")
            }
        }

        var badge = Request.Badge.none
        if let b = body["badge"], !b.isNull {
            switch b {
            case .number:
                guard let n = b.intValue, n >= 0 else { throw .invalid("badge must be an integer 0 or more") }
                badge = .all(n)
            case .object(let members):
                var map: [String: Int] = [:]
                for (user, value) in members {
                    guard let n = value.intValue, n >= 0 else {
                        throw .invalid("badge.\(user) must be an integer 0 or more")
                    }
                    map[user] = n
                }
                badge = .perUser(map)
            default: throw .invalid("badge must be an integer, or an object of user id to integer")
            }
        }

        var sound: JSON?
        if let s = body["sound"], !s.isNull {
            switch s {
            case .string, .object: sound = s
            default: throw .invalid("sound must be a string (or a critical-sound object)")
            }
        }
        var mutable = false
        if let m = body["mutable_content"], !m.isNull {
            guard let flag = m.boolValue else { throw .invalid("mutable_content must be true or false") }
            mutable = flag
        }
        let threadID = try optionalString(body, "thread_id")

        var data: [(String, JSON)] = []
        if let d = body["data"], !d.isNull {
            guard case .object(let members) = d else { throw .invalid("data must be a JSON object") }
            for (key, _) in members where FanOut.reservedKeys.contains(key) {
                throw .invalid("data.\(key) is reserved (the service writes it)")
            }
            data = members
        }
        guard alert != nil || badge.isSet || sound != nil || mutable || !data.isEmpty else {
            throw .invalid("nothing to send: give alert, badge, sound or data")
        }

        var priority: Int?
        var named: NamedPriority?
        if let p = body["priority"], !p.isNull {
            if let name = p.stringValue {
                guard let level = NamedPriority(rawValue: name) else {
                    throw .invalid("priority must be low, normal, high or critical (or APNs' 10, 5 or 1)")
                }
                named = level
                priority = level.apnsPriority
            } else {
                guard let n = p.intValue, [10, 5, 1].contains(n) else {
                    throw .invalid("priority must be low, normal, high or critical (or APNs' 10, 5 or 1)")
                }
                priority = n
            }
        }
        var expiration: Int64?
        if let e = body["expiration"], !e.isNull {
            guard let n = e.integralValue, n >= 0 else { throw .invalid("expiration must be a UNIX time in seconds, 0 or more") }
            expiration = n
        }
        let collapseID = try optionalString(body, "collapse_id", controlCharacters: false)

        var request = Request(type: type, entityType: entityType, entityID: entityID, app: app, audience: audience,
                              alert: alert, badge: badge, sound: sound, mutableContent: mutable, threadID: threadID,
                              data: data, collapseID: collapseID, priority: priority, expiration: expiration)
        request.interruptionLevel = named?.interruptionLevel
        request.critical = named == .critical || app.types[type]?.critical == true
        request.entityTitle = entityTitle
        // The largest payload this request can make must fit, and the engine must
        // accept the headers: checked now, so a 400 stores nothing.
        try request.checkSendable()
        request.data = data
        return request
    }

    private func optionalString(_ body: JSON, _ key: String, controlCharacters: Bool = true) throws(RequestError) -> String? {
        guard let value = body[key], !value.isNull else { return nil }
        guard let s = value.stringValue, s.utf8.count <= 1024 else {
            throw .invalid("\(key) must be a string of at most 1024 bytes")
        }
        if !controlCharacters, !s.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7f }) {
            throw .invalid("\(key) has a control character")
        }
        return s
    }

    /// Fans out and commits. Returns only once every delivery is in the outbox.
    ///
    /// Per user, at `now`: in quiet hours (and not critical), the app's mode makes the
    /// payload silent or holds the deliveries until the hours end (`notBefore`; with a
    /// collapse id, a `.defer` hold: the latest wins). A type with a `coalesce` rule
    /// holds each delivery in its device's window for (type, entity) instead, to go
    /// once when the window closes (or when quiet hours end, if later).
    /// `notificationID`: the caller's (an idempotency key's resource id), else a new one.
    ///
    /// The audience is read, planned and written a part at a time (`fanOutPart`
    /// users, the next page read while one is written), so that memory holds two
    /// parts at most, never the whole audience: the notification stays marked as
    /// planning until the last part is in, and only then do its deliveries enter the
    /// outbox, all at once (see `FanOutPlans`). A
    /// process that dies while planning has sent none of it; its plan is discarded
    /// at the next start (or, on a shared database, once its mark runs out).
    package func run(_ request: Request, notificationID: String? = nil) async throws -> Result {
        let now = clock.nowMillis
        let notification = NewNotification(id: notificationID ?? UUID().uuidString.lowercased(), type: request.type,
                                           entityType: request.entityType, entityID: request.entityID,
                                           appType: request.app.appType)
        let part = max(1, config.worker.fanOutPart)
        let leaseMillis = Int64(config.worker.leaseSeconds) * 1000
        try await store.beginFanOut(notification, now: now, planningUntil: clock.nowMillis + leaseMillis)
        var plan = Plan(request: request, now: now)
        var payloads: [[UInt8]: Int64] = [:]
        // Each page is read while the one before it is planned and written: the read
        // (a reader connection) and the write (the one writer) then run side by side.
        var reading = AudiencePages(store: store, appType: request.app.appType, audience: request.audience,
                                    size: part).readingNext()
        do {
            while case (let rest, let page?) = try await reading.value {
                reading = rest.readingNext()
                let deliveries = plan.add(page.recipients, users: page.users)
                guard !deliveries.isEmpty else { continue }
                payloads = try await store.addFanOutPart(notification, deliveries, payloads: payloads, now: now,
                                                         planningUntil: clock.nowMillis + leaseMillis)
            }
            try await store.completeFanOut(notification, held: plan.held, payloads: payloads, now: now)
        } catch {
            // No read outlives the request.
            reading.cancel()
            _ = try? await reading.value
            // Nothing of it is in the outbox yet: none of it is left behind.
            _ = try? await store.discardPlan(notificationID: notification.id, markBefore: .max)
            throw error
        }
        // Handed to one of this process's loops only when every delivery is due now.
        if plan.allDue, plan.counts.deliveries > 0, let lessee = handoff?.lessee() {
            await handOver(notification.id, to: lessee, pageSize: part, leaseMillis: leaseMillis)
        }
        metrics.notification(app: request.app.appType, deliveries: plan.counts.deliveries)
        return Result(notificationID: notification.id, deliveries: plan.counts.deliveries,
                      skippedPreferences: plan.counts.preferences, skippedNoDevices: plan.counts.noDevices)
    }

    /// Before a notification is made under an id an earlier request or worker may
    /// have used (an idempotency key taken over, a schedule claimed again): that
    /// one's plan, if its planner died mid-way, goes, as it would at a start. Throws
    /// a temporary error while its planner may still be at work.
    package func discardDeadPlan(_ notificationID: String) async throws {
        if try await store.discardPlan(notificationID: notificationID, markBefore: clock.nowMillis) == .stillPlanning {
            throw StoreError("notification \(notificationID) is being fanned out by another request", temporary: true)
        }
    }

    /// Gives the loop `lessee` the completed fan-out's deliveries, a page at a time,
    /// each page leased to it as it goes (each device's state as a claim reads it),
    /// never more than the loop has room for: what is leased is what it holds, and
    /// its renewals cover it. The loop takes as fast as APNs answers, so the answer
    /// waits for room while the loop makes some, but not once it has stopped, makes
    /// none for a while (APNs not answering), or a third of a lease has gone. What
    /// is not handed over stays free in the outbox, for the loops' claims.
    private func handOver(_ notificationID: String, to lessee: String, pageSize: Int, leaseMillis: Int64) async {
        guard let handoff else { return }
        let deadline = clock.nowMillis + leaseMillis / 3
        var after: Int64 = 0
        var idleTurns = 0
        while handoff.isOpen(lessee) {
            let room = min(pageSize, handoff.limit - handoff.queued(lessee))
            guard room > 0 else {
                idleTurns += 1
                if idleTurns >= 50 || clock.nowMillis >= deadline { return }
                try? await Task.sleep(for: .milliseconds(10))
                continue
            }
            idleTurns = 0
            guard let page = try? await store.leaseFanOutPage(notificationID: notificationID, worker: lessee, after: after,
                                                              limit: room, leaseMillis: leaseMillis, now: clock.nowMillis),
                  let last = page.last else { return }
            after = last.id
            let refused = handoff.deliver(page, to: lessee)
            if !refused.isEmpty {
                // The loop stopped, or another fan-out took the room meanwhile: the
                // outbox has them, free to be claimed at once. Should this fail, the
                // lease runs out.
                try? await store.unclaim(worker: lessee, deliveryIDs: refused.map(\.id))
                return
            }
        }
    }

    /// How many deliveries a fan-out made, and how many users it skipped and why.
    struct Counts: Sendable {
        var deliveries = 0
        var preferences = 0
        var noDevices = 0
    }

    /// The audience, a page of users at a time: named users in the order given, a
    /// company's by user id.
    struct AudiencePages: Sendable {
        typealias Page = (recipients: [Recipient], users: [String]?)

        let store: any DeliveryStore
        let appType: String
        let audience: Audience
        let size: Int
        private var offset = 0
        private var after: String?
        private var done = false

        init(store: any DeliveryStore, appType: String, audience: Audience, size: Int) {
            self.store = store
            self.appType = appType
            self.audience = audience
            self.size = size
        }

        /// `next()` in a task of its own, so that the caller can work on the page
        /// before meanwhile: the task's value is the page and the pages after it.
        func readingNext() -> Task<(AudiencePages, Page?), any Error> {
            Task { [self] in
                var rest = self
                let page = try await rest.next()
                return (rest, page)
            }
        }

        /// The next page's recipients, with the users it names (for named users, each
        /// one, known to the store or not); nil after the last.
        mutating func next() async throws -> Page? {
            guard !done else { return nil }
            switch audience {
            case .users(let ids):
                guard offset < ids.count else { return nil }
                let users = Array(ids[offset..<min(offset + size, ids.count)])
                offset += users.count
                return (try await store.recipients(appType: appType, audience: .users(users)), users)
            case .company(let company):
                let page = try await store.recipients(appType: appType, company: company, after: after, limit: size)
                guard let last = page.last else { return nil }
                after = last.userID
                if page.count < size { done = true }
                return (page, nil)
            }
        }
    }

    /// What a fan-out has planned so far: the apns-id generator and payloads shared
    /// by every part, the counts, and the deliveries with a hold (joined to their
    /// windows when the plan completes: few, as batching and quiet hours touch few).
    struct Plan {
        let request: Request
        let now: Int64
        private(set) var counts = Counts()
        private(set) var held: [NewDelivery] = []
        private(set) var allDue = true
        private var ids = APNsIDs()
        private var payloads: [PayloadVariant: [UInt8]] = [:]

        init(request: Request, now: Int64) {
            self.request = request
            self.now = now
        }

        /// The deliveries for one page of recipients, as the store read them: no
        /// awaits in here. `users`: the named users the page stands for, in the
        /// request's order (one the store does not know has no devices); nil: a
        /// company's, as the store lists them (no look-up by id).
        mutating func add(_ recipients: [Recipient], users: [String]?) -> [NewDelivery] {
            let coalesce = request.app.types[request.type]?.coalesce
            let ordered: [(userID: String, recipient: Recipient?)]
            if let users {
                let byUser = Dictionary(recipients.map { ($0.userID, $0) }, uniquingKeysWith: { first, _ in first })
                ordered = users.map { ($0, byUser[$0]) }
            } else {
                ordered = recipients.map { ($0.userID, $0) }
            }

            var deliveries: [NewDelivery] = []
            deliveries.reserveCapacity(recipients.reduce(0) { $0 + $1.devices.count })
            for (userID, recipient) in ordered {
                // No device first: such a user could not be reached whatever they chose.
                guard let recipient, !recipient.devices.isEmpty else {
                    counts.noDevices += 1
                    continue
                }
                guard request.app.allows(request.type, preferences: recipient.preferences) else {
                    counts.preferences += 1
                    continue
                }
                var silent = false
                var heldUntil: Int64?
                if !request.critical, let quiet = QuietHours(preferences: recipient.preferences),
                   let end = quiet.end(ifQuietAt: now) {
                    switch request.app.quietHours {
                    case .silent: silent = true
                    case .defer: heldUntil = end
                    }
                }
                let variant = PayloadVariant(badge: request.badge(for: userID), silent: silent)
                let payload: [UInt8]
                if let cached = payloads[variant] {
                    payload = cached
                } else {
                    payload = request.payload(badge: variant.badge, silent: silent)
                    payloads[variant] = payload
                }
                for device in recipient.devices {
                    var delivery = NewDelivery(
                        userID: userID, deviceID: device.id, token: device.token, environment: device.environment,
                        apnsID: ids.next(), payload: payload, pushType: "alert",
                        priority: request.priority, collapseID: request.collapseID, expiration: request.expiration,
                        notBefore: heldUntil)
                    if let coalesce {
                        let closes = now + Int64(coalesce.windowSeconds) * 1000
                        delivery.notBefore = max(closes, heldUntil ?? closes)
                        delivery.hold = Hold(
                            kind: .coalesce(carrierAPNsID: ids.next(),
                                            carrierCollapseID: Coalescing.collapseID(user: userID, type: request.type,
                                                                                     entityID: request.entityID)),
                            key: Coalescing.key(type: request.type, entityID: request.entityID), closesAt: closes)
                    } else if let heldUntil, let collapseID = request.collapseID {
                        delivery.hold = Hold(kind: .defer, key: collapseID, closesAt: heldUntil)
                    }
                    if !delivery.isDueNow { allDue = false }
                    if delivery.hold != nil { held.append(delivery) }
                    deliveries.append(delivery)
                }
            }
            counts.deliveries += deliveries.count
            return deliveries
        }
    }
}

/// One payload per badge value and quiet-hours treatment, shared by every delivery
/// that has them.
struct PayloadVariant: Hashable {
    var badge: Int?
    var silent: Bool
}

extension FanOut.Request.Badge {
    var isSet: Bool { if case .none = self { false } else { true } }
}

extension FanOut.Request {
    func badge(for userID: String) -> Int? {
        switch badge {
        case .none: nil
        case .all(let n): n
        case .perUser(let map): map[userID]
        }
    }

    /// `{"aps":{"alert":…,"badge":…,"sound":…},"type":…,"entity_type":…,"entity_id":…, …data}`.
    /// Silent (quiet hours): no sound, and `interruption-level: passive`.
    func payload(badge: Int?, silent: Bool = false) -> [UInt8] {
        var aps: [(String, JSON)] = []
        if let alert { aps.append(("alert", alert)) }
        if let badge { aps.append(("badge", .int(badge))) }
        if let sound, !silent { aps.append(("sound", sound)) }
        if let threadID { aps.append(("thread-id", .string(threadID))) }
        if mutableContent { aps.append(("mutable-content", .int(1))) }
        if let level = silent ? "passive" : interruptionLevel { aps.append(("interruption-level", .string(level))) }
        var object: [(String, JSON)] = [("aps", .object(aps)), ("type", .string(type))]
        if let entityType { object.append(("entity_type", .string(entityType))) }
        if let entityID { object.append(("entity_id", .string(entityID))) }
        if let entityTitle { object.append(("entity_title", .string(entityTitle))) }
        object.append(contentsOf: data)
        return JSON.object(object).bytes
    }

    /// Every payload variant within APNs' limit, and headers the engine takes.
    func checkSendable() throws(RequestError) {
        var badges: [Int?] = [nil]
        switch badge {
        case .none: break
        case .all(let n): badges = [n]
        case .perUser(let map): badges = [nil] + (map.values.max().map { [$0] } ?? [])
        }
        // Quiet hours' silent variant too: it may be the larger (passive for a sound).
        for (b, silent) in badges.flatMap({ b in [(b, false), (b, true)] }) {
            let bytes = payload(badge: b, silent: silent)
            do {
                _ = try APNs.Notification(topic: app.topic, pushType: .alert, priority: priority.flatMap(Priority.init(rawValue:)),
                                     expiration: expiration.map { .at(unixSeconds: $0) }, collapseID: collapseID,
                                     payload: Payload(json: bytes))
            } catch let error as APNs.Notification.Error {
                throw .invalid(error.description)
            } catch {
                throw .invalid("\(error)")
            }
        }
    }
}

/// Time-ordered (version 7, RFC 9562) UUIDs in lower case, as apns-ids: 48 bits of
/// Unix milliseconds, a 12-bit counter that keeps one generator's ids increasing
/// within a millisecond, then 62 random bits. Random (version 4) ids landed all over
/// the log's unique apns-id index, and inserting 100k of them was most of an
/// enqueue; ordered ones append at its right edge. The random bits come from the
/// system's source 4 KiB at a time (Foundation's `UUID()` opens /dev/urandom for
/// each one). APNs takes any canonical UUID.
package struct APNsIDs {
    private var bytes = [UInt8](repeating: 0, count: 4096)
    private var used = 4096
    private var lastMillis: UInt64 = 0
    private var counter: UInt64 = 0
    private let now: () -> UInt64

    package init(now: @escaping () -> UInt64 = { UInt64(max(0, SystemClock().nowMillis)) }) {
        self.now = now
    }

    package mutating func next() -> String {
        // Never backwards: a clock step back, or 4,096 ids in one millisecond, borrow
        // the next millisecond (RFC 9562 §6.2, method 1).
        let t = now()
        if t > lastMillis {
            lastMillis = t
            counter = 0
        } else {
            counter += 1
            if counter == 4096 {
                lastMillis += 1
                counter = 0
            }
        }
        if used + 8 > bytes.count { refill() }
        defer { used += 8 }
        let (millis, count, random) = (lastMillis, counter, used)
        return bytes.withUnsafeBufferPointer { b in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { raw in
                for i in 0..<6 { raw[i] = UInt8(truncatingIfNeeded: millis >> (40 - 8 * UInt64(i))) }
                raw[6] = 0x70 | UInt8(truncatingIfNeeded: count >> 8)            // version 7
                raw[7] = UInt8(truncatingIfNeeded: count)
                for i in 0..<8 { raw[8 + i] = b[random + i] }
                raw[8] = (raw[8] & 0x3f) | 0x80                                  // RFC 9562 variant
                let hex: StaticString = "0123456789abcdef"
                return String(unsafeUninitializedCapacity: 36) { out in
                    var o = 0
                    for i in 0..<16 {
                        if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = UInt8(ascii: "-"); o += 1 }
                        out[o] = hex.utf8Start[Int(raw[i] >> 4)]
                        out[o + 1] = hex.utf8Start[Int(raw[i] & 0x0f)]
                        o += 2
                    }
                    return o
                }
            }
        }
    }

    /// One system call for 4 KiB (glibc's `arc4random_buf` is `getrandom`):
    /// `SystemRandomNumberGenerator` makes one per 8 bytes, which was one per id.
    private mutating func refill() {
        bytes.withUnsafeMutableBytes { buffer in arc4random_buf(buffer.baseAddress!, buffer.count) }
        used = 0
    }
}
