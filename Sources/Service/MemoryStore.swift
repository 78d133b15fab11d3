import Store

// TEMPORARY: an in-memory DeliveryStore so the service can run before SQLiteStore
// lands from the store branch. Deleted once it does.
actor MemoryStore: DeliveryStore {
    struct Dev {
        var id: Int64
        var reg: DeviceRegistration
        var active: Bool
        var registeredAt: Int64
        var createdAt: Int64
        var lastUsedAt: Int64?
    }
    struct Out {
        var id: Int64
        var notificationID: String
        var appType: String
        var delivery: NewDelivery
        var attempts = 0
        var crossTried = false
        var worker: String?
        var leaseUntil: Int64 = 0
        var availableAt: Int64 = 0
        var final: DeliveryOutcome?
        var finishedAt: Int64?
    }
    var devices: [Int64: Dev] = [:]
    var prefs: [String: [String: Bool]] = [:]
    var notifications: [String: (NewNotification, Int64, [Int64])] = [:]
    var outbox: [Int64: Out] = [:]
    var nextID: Int64 = 1

    func migrate() async throws(StoreError) {}

    func register(_ device: DeviceRegistration, now: Int64) async throws(StoreError) {
        if let existing = devices.values.first(where: { $0.reg.token == device.token && $0.reg.appType == device.appType }) {
            devices[existing.id]!.reg = device
            devices[existing.id]!.active = true
            devices[existing.id]!.registeredAt = now
            devices[existing.id]!.lastUsedAt = now
        } else {
            devices[nextID] = Dev(id: nextID, reg: device, active: true, registeredAt: now, createdAt: now, lastUsedAt: now)
            nextID += 1
        }
    }

    func unregister(userID: String, token: String, now: Int64) async throws(StoreError) -> Bool {
        var found = false
        for (id, d) in devices where d.reg.userID == userID && d.reg.token == token && d.active {
            devices[id]!.active = false
            found = true
        }
        return found
    }

    func devices(userID: String) async throws(StoreError) -> [DeviceRow] {
        devices.values.filter { $0.reg.userID == userID && $0.active }.sorted { ($0.registeredAt, $0.id) > ($1.registeredAt, $1.id) }
            .map { DeviceRow(id: $0.id, platform: $0.reg.platform, appType: $0.reg.appType, deviceName: $0.reg.deviceName,
                             osVersion: $0.reg.osVersion, appVersion: $0.reg.appVersion, lastUsedAt: $0.lastUsedAt,
                             createdAt: $0.createdAt) }
    }

    func preferences(userID: String, appType: String) async throws(StoreError) -> [String: Bool] {
        prefs[userID + "\u{0}" + appType] ?? [:]
    }

    func updatePreferences(userID: String, appType: String, _ changes: [String: Bool], now: Int64) async throws(StoreError) {
        prefs[userID + "\u{0}" + appType, default: [:]].merge(changes) { $1 }
    }

    func recipients(appType: String, audience: Audience) async throws(StoreError) -> [Recipient] {
        let active = devices.values.filter { $0.active && $0.reg.appType == appType && $0.reg.platform == "ios" }
        var users: [String]
        switch audience {
        case .users(let ids): users = ids
        case .company(let c):
            users = []
            for d in active.sorted(by: { $0.id < $1.id }) where d.reg.companyID == c && !users.contains(d.reg.userID) {
                users.append(d.reg.userID)
            }
        }
        return users.map { u in
            Recipient(userID: u, preferences: prefs[u + "\u{0}" + appType] ?? [:],
                      devices: active.filter { $0.reg.userID == u }.sorted { $0.id < $1.id }
                        .map { .init(id: $0.id, token: $0.reg.token, environment: $0.reg.environment) })
        }
    }

    func enqueue(_ notification: NewNotification, _ deliveries: [NewDelivery], now: Int64) async throws(StoreError) {
        var ids: [Int64] = []
        for d in deliveries {
            outbox[nextID] = Out(id: nextID, notificationID: notification.id, appType: notification.appType, delivery: d)
            ids.append(nextID)
            nextID += 1
        }
        notifications[notification.id] = (notification, now, ids)
    }

    func claim(worker: String, limit: Int, leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        var out: [ClaimedDelivery] = []
        for id in outbox.keys.sorted() where out.count < limit {
            let o = outbox[id]!
            guard o.final == nil, o.availableAt <= now, o.worker == nil || o.leaseUntil <= now else { continue }
            if let dev = devices[o.delivery.deviceID], !dev.active {
                outbox[id]!.final = DeliveryOutcome(deliveryID: id, delivered: false, status: 0, reason: "Inactive",
                                                    timestamp: now, attempts: o.attempts)
                outbox[id]!.finishedAt = now
                continue
            }
            outbox[id]!.worker = worker
            outbox[id]!.leaseUntil = now + leaseMillis
            out.append(ClaimedDelivery(id: id, notificationID: o.notificationID, appType: o.appType, delivery: o.delivery,
                                       attempts: o.attempts, crossEnvironmentTried: o.crossTried))
        }
        return out
    }

    func renew(worker: String, deliveryIDs: [Int64], leaseMillis: Int64, now: Int64) async throws(StoreError) {
        for id in deliveryIDs where outbox[id]?.worker == worker && outbox[id]?.final == nil {
            outbox[id]!.leaseUntil = now + leaseMillis
        }
    }

    func finish(worker: String, _ outcomes: [DeliveryOutcome], now: Int64) async throws(StoreError) -> Int {
        var ignored = 0
        for o in outcomes {
            guard let row = outbox[o.deliveryID], row.worker == worker, row.final == nil else { ignored += 1; continue }
            outbox[o.deliveryID]!.final = o
            outbox[o.deliveryID]!.finishedAt = now
            outbox[o.deliveryID]!.attempts = o.attempts
            let devID = row.delivery.deviceID
            switch o.tokenChange {
            case .deactivate(_, let before)?:
                if let d = devices[devID], d.registeredAt < before { devices[devID]!.active = false }
            case .deactivateNow?: devices[devID]?.active = false
            case .moveEnvironment(let e)?: devices[devID]?.reg.environment = e
            case nil: break
            }
        }
        return ignored
    }

    func retry(worker: String, deliveryID: Int64, environment: String, now: Int64) async throws(StoreError) {
        guard outbox[deliveryID]?.worker == worker else { return }
        outbox[deliveryID]!.delivery.environment = environment
        outbox[deliveryID]!.crossTried = true
        outbox[deliveryID]!.attempts += 1
        outbox[deliveryID]!.worker = nil
        outbox[deliveryID]!.availableAt = now
    }

    func release(worker: String, deliveryIDs: [Int64], availableAt: Int64, now: Int64) async throws(StoreError) {
        for id in deliveryIDs where outbox[id]?.worker == worker {
            outbox[id]!.attempts += 1
            outbox[id]!.worker = nil
            outbox[id]!.availableAt = availableAt
        }
    }

    func view(_ o: Out) -> DeliveryView {
        DeliveryView(notificationID: o.notificationID, userID: o.delivery.userID, token: o.delivery.token,
                     environment: o.delivery.environment,
                     state: o.final == nil ? "pending" : (o.final!.delivered ? "delivered" : "failed"),
                     apnsID: o.delivery.apnsID, status: o.final?.status, reason: o.final?.reason,
                     timestamp: o.final?.timestamp, attempts: o.attempts, finishedAt: o.finishedAt)
    }

    func notification(id: String) async throws(StoreError) -> NotificationView? {
        guard let (n, created, ids) = notifications[id] else { return nil }
        return NotificationView(id: n.id, type: n.type, entityID: n.entityID, createdAt: created,
                                deliveries: ids.map { view(outbox[$0]!) })
    }

    func delivery(apnsID: String) async throws(StoreError) -> DeliveryView? {
        outbox.values.first { $0.delivery.apnsID == apnsID }.map(view)
    }

    func outboxDepth() async throws(StoreError) -> Int {
        outbox.values.filter { $0.final == nil }.count
    }
}
