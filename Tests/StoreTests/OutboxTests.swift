import Synchronization
import Foundation
import Testing
import TestSupport
@testable import Store

/// The outbox: enqueue, claim, leases, finish, retry. Each behaviour runs on both
/// stores; "another instance" is a second store on the same file or database.
@Suite(.postgresCluster) struct OutboxTests {
    @Test(arguments: StoreKind.allCases)
    func enqueueIsAllOrNothingAndCommittedWhenItReturns(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 2) { stores in
            let (store, other) = (stores[0], stores[1])
            var deliveries = try await enqueue(store, "n1", [("u1", 1), ("u2", 2)])

            // The second notification reuses an apns-id in its last delivery: nothing of it stays.
            deliveries = (0..<3).map { i in
                NewDelivery(userID: "u\(i)", deviceID: Int64(i), token: token(i), environment: "sandbox",
                            apnsID: i == 2 ? deliveries[0].apnsID : "n2-\(i)", payload: [1, 2, 3])
            }
            let error = await #expect(throws: StoreError.self) {
                try await store.enqueue(NewNotification(id: "n2", type: "t", entityType: nil, entityID: nil,
                                                        appType: "staff"), deliveries, now: 2)
            }
            let unique = switch kind {
            case .sqlite: "UNIQUE constraint failed: deliveries.apns_id"
            case .postgres: #"duplicate key value violates unique constraint "deliveries_apns_id_key""#
            }
            #expect(error?.description == "enqueue notification n2: \(unique)")
            #expect(try await store.notification(id: "n2") == nil)
            #expect(try await store.delivery(apnsID: "n2-0") == nil)
            #expect(try await store.outboxDepth() == 2)

            // Committed when enqueue returns: another instance (another process) sees it all.
            let view = try #require(try await other.notification(id: "n1"))
            #expect(view.type == "order_created" && view.entityID == "o-n1" && view.createdAt == 1)
            #expect(view.deliveries.map(\.state) == ["pending", "pending"])
            #expect(view.deliveries.map(\.apnsID) == ["n1-0", "n1-1"])
            #expect(try await other.outboxDepth() == 2)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func claimTakesTheOldestFreeDeliveriesUpToTheLimitWithEverythingToSendThem(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "new", count: 3, now: 200)
            try await enqueueMany(store, "old", count: 3, now: 100)
            try await enqueueMany(store, "later", count: 2, now: 1_000)

            let first = try await store.claim(worker: "w1", limit: 4, leaseMillis: 60_000, now: 300)
            #expect(first.map(\.delivery.apnsID) == ["old-0", "old-1", "old-2", "new-0"])
            let second = try await store.claim(worker: "w2", limit: 10, leaseMillis: 60_000, now: 300)
            #expect(second.map(\.delivery.apnsID) == ["new-1", "new-2"])  // never w1's, never the future's
            #expect(try await store.claim(worker: "w3", limit: 10, leaseMillis: 60_000, now: 300).isEmpty)
            #expect(try await store.claim(worker: "w3", limit: 0, leaseMillis: 60_000, now: 2_000).isEmpty)
            #expect(try await store.outboxDepth() == 8)

            let claimed = try #require(first.first)
            #expect(claimed.notificationID == "old" && claimed.appType == "staff")
            #expect(claimed.delivery == NewDelivery(userID: "u0", deviceID: 0, token: token(0), environment: "production",
                                                   apnsID: "old-0", payload: Array(#"{"aps":{"alert":"old 0"}}"#.utf8)))
            #expect(claimed.attempts == 0 && claimed.crossEnvironmentTried == false)
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'w1' AND lease_until = 60300") == 4)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anEnqueueWithALeaseHandsItsDeliveriesToThatWorkerAsAClaimWould(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 2) { stores in
            let (store, other) = (stores[0], stores[1])
            let active = try await register(store, "u1", 1)
            let gone = try await register(store, "u2", 2)
            #expect(try await store.unregister(userID: "u2", token: token(2), now: 2))
            let deliveries = [(1, active), (2, gone)].map { n, device in
                NewDelivery(userID: "u\(n)", deviceID: device, token: token(n), environment: "production",
                            apnsID: "n-\(n)", payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8), collapseID: "c")
            }
            let claimed = try await store.enqueue(
                NewNotification(id: "n", type: "t", entityType: nil, entityID: nil, appType: "staff"), deliveries,
                now: 10, lease: OutboxLease(worker: "w", millis: 1_000))
            #expect(claimed.map(\.delivery) == deliveries)
            // As a claim reads it: the device unregistered since is not to be sent.
            #expect(claimed.map(\.deviceActive) == [true, false])
            #expect(claimed.allSatisfy { $0.notificationID == "n" && $0.appType == "staff" && $0.attempts == 0
                                         && !$0.crossEnvironmentTried && $0.batched == 0 })
            #expect(Set(claimed.map(\.id)).count == 2)

            // Held by w under the lease: no other worker's claim takes them meanwhile.
            #expect(try await other.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 500).isEmpty)
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'w' AND lease_until = 1010") == 2)
            // w records them as it records what it claimed.
            #expect(try await store.finish(worker: "w", [delivered(claimed[0].id)], now: 20) == 0)
            #expect(try await store.delivery(apnsID: "n-1")?.state == "delivered")

            // Given back unsent: free at once (well inside the lease), no attempt counted;
            // a worker that does not hold it gives back nothing.
            try await store.unclaim(worker: "w", deliveryIDs: [claimed[1].id])
            let again = try await other.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 30)
            #expect(again.map(\.id) == [claimed[1].id])
            #expect(again.first?.attempts == 0)
            try await store.unclaim(worker: "w", deliveryIDs: [claimed[1].id])
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'w2'") == 1)
        }
    }

    /// A company's audience read a page at a time: every user once, in user-id order,
    /// with all of their devices of the company (an Android-only user with none), and
    /// only the company's devices; the same recipients as the whole company's read.
    @Test(arguments: StoreKind.allCases)
    func aCompanyIsReadAPageOfUsersAtATime(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for n in 1...25 { try await register(store, "u\(100 + n)", n, company: "c") }
            try await register(store, "u105", 26, company: "c", now: 2)
            try await register(store, "u110", 27, platform: "android", company: "c")
            try await register(store, "u130", 28, platform: "android", company: "c")
            try await register(store, "u107", 29, company: "other")
            try await store.updatePreferences(userID: "u112", appType: "staff", ["t": false], now: 1)
            var pages: [[Recipient]] = []
            var after: String?
            while true {
                let page = try await store.recipients(appType: "staff", company: "c", after: after, limit: 10)
                guard let last = page.last else { break }
                pages.append(page)
                after = last.userID
            }
            #expect(pages.map(\.count) == [10, 10, 6])
            let all = pages.flatMap { $0 }
            #expect(all.map(\.userID) == (101...125).map { "u\($0)" } + ["u130"])
            #expect(all.first { $0.userID == "u105" }?.devices.map(\.token) == [token(26), token(5)], "newest first")
            #expect(all.first { $0.userID == "u107" }?.devices.map(\.token) == [token(7)], "the company's only")
            #expect(all.first { $0.userID == "u130" }?.devices.isEmpty == true)
            #expect(all.first { $0.userID == "u112" }?.preferences == ["t": false])
            let whole = try await store.recipients(appType: "staff", audience: .company("c"))
            #expect(whole == all)
        }
    }

    /// A fan-out written in parts: while it plans, its deliveries are in the log but
    /// not in the outbox, so no claim of any instance sends a part of it; completing
    /// it enters them all, and the enqueuing process leases them a page at a time,
    /// each as a claim returns it, leaving what others hold. One payload row serves
    /// every part.
    @Test(arguments: StoreKind.allCases)
    func aFanOutInPartsReachesTheOutboxOnlyWhenItsPlanIsComplete(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 2) { stores in
            let (store, other) = (stores[0], stores[1])
            var devices: [Int64] = []
            for n in 1...250 { devices.append(try await register(store, "u\(1000 + n)", n, company: "c")) }
            let notification = NewNotification(id: "p", type: "t", entityType: nil, entityID: nil, appType: "staff")
            try await store.beginFanOut(notification, now: 10, planningUntil: 60_000)
            var payloads: [[UInt8]: Int64] = [:]
            var after: String?
            var parts = 0
            while true {
                let page = try await store.recipients(appType: "staff", company: "c", after: after, limit: 100)
                guard let last = page.last else { break }
                after = last.userID
                payloads = try await store.addFanOutPart(notification, oneEach("p", page), payloads: payloads,
                                                         now: 10, planningUntil: 60_000)
                parts += 1
                #expect(try await other.claim(worker: "w2", limit: 1_000, leaseMillis: 1_000, now: 20).isEmpty)
                #expect(try await other.outboxDepth() == (parts == 1 ? 0 : 1), "the other notification's only")
                if parts == 1 {
                    // Another notification's delivery between two parts (not due before 25).
                    try await enqueue(store, "between", [(user: "u1001", device: devices[0])], now: 25)
                }
            }
            #expect(parts == 3)
            #expect(payloads.count == 1, "one payload row for every part")
            #expect(try await store.scalar("SELECT count(*) FROM payloads WHERE notification_id = 'p'") == 1)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE notification_id = 'p'") == 250)

            try await store.completeFanOut(notification, held: [], payloads: payloads, now: 10)
            #expect(try await store.scalar("SELECT count(*) FROM notifications WHERE planning_until IS NOT NULL") == 0)
            #expect(try await other.outboxDepth() == 251)
            // Another worker's claim took the first two meanwhile, and a third worker
            // holds one amid the first page: the pages leave them. The other
            // notification's delivery, due now, amid the first page too, is left free.
            let taken = try await other.claim(worker: "w2", limit: 2, leaseMillis: 60_000, now: 20)
            #expect(taken.map(\.delivery.deviceID) == Array(devices.prefix(2)))
            let amid = try #require(try await store.scalar(
                "SELECT id FROM deliveries WHERE notification_id = 'p' ORDER BY id LIMIT 1 OFFSET 50"))
            try await store.execute("UPDATE outbox SET claimed_by = 'w9', lease_until = 50000 WHERE delivery_id = \(amid)")
            try await store.execute("""
                UPDATE outbox SET available_at = 10
                WHERE delivery_id = (SELECT id FROM deliveries WHERE notification_id = 'between')
                """)
            #expect(try await store.leaseFanOutPage(notificationID: "p", worker: "w", after: 0, limit: 10,
                                                    leaseMillis: 60_000, now: 9).isEmpty, "none due before now")
            var claimed: [ClaimedDelivery] = []
            var from: Int64 = 0
            while true {
                let page = try await store.leaseFanOutPage(notificationID: "p", worker: "w", after: from, limit: 100,
                                                           leaseMillis: 60_000, now: 20)
                guard let last = page.last else { break }
                #expect(page.count <= 100)
                claimed += page
                from = last.id
            }
            #expect(try await other.claim(worker: "w3", limit: 1_000, leaseMillis: 1_000, now: 30).map(\.notificationID)
                    == ["between"], "every row of p held")
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'w' AND lease_until = 60020") == 247)
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'w9' AND lease_until = 50000") == 1)
            #expect(claimed.map(\.delivery.deviceID) == Array(devices.dropFirst(2)).filter { $0 != devices[50] })
            #expect(!claimed.contains { $0.id == amid })
            #expect(claimed.allSatisfy { $0.deviceActive && $0.notificationID == "p" && $0.appType == "staff" })
            #expect(claimed.allSatisfy { $0.delivery.payload == Array(#"{"aps":{"alert":"hi"}}"#.utf8) })
            for c in claimed.prefix(3) + claimed.suffix(3) {
                #expect(try await store.scalar("SELECT id FROM deliveries WHERE apns_id = '\(c.delivery.apnsID)'") == c.id)
            }
            #expect(try await store.finish(worker: "w", claimed.map { delivered($0.id) }, now: 30) == 0)
            #expect(try await other.finish(worker: "w2", taken.map { delivered($0.id) }, now: 30) == 0)
            #expect(try await store.finish(worker: "w9", [delivered(amid)], now: 30) == 0)
            #expect(try await store.notification(id: "p")?.counts == ["delivered": 250])

            // On SQLite a page is read from the notification's index (its row looked up
            // once) and leased by the outbox's key over its range: no scan, no sort.
            if let sqlite = store as? SQLiteStore {
                let read = try await sqlite.queryPlan(PlanStatements.readPage.sqlite, arguments: ["p", 0, 20, 100])
                #expect(read.first?.contains("SEARCH n USING INDEX") == true, "the notification once: \(read)")
                #expect(read.dropFirst().first?.contains(
                    "SEARCH d USING INDEX deliveries_by_notification (notification_id=? AND rowid>?)") == true, "\(read)")
                #expect(!read.contains { $0.contains("TEMP B-TREE") }, "\(read)")
                let lease = try await sqlite.queryPlan(PlanStatements.leaseRange.sqlite, arguments: [1, "w", 1, 100, 20, "p"])
                #expect(lease.contains { $0.contains("outbox USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") }, "\(lease)")
                #expect(!lease.contains { $0.contains("SCAN") }, "\(lease)")
                let gapless = try await sqlite.queryPlan(PlanStatements.leaseGaplessRange.sqlite, arguments: [1, "w", 1, 100, 20])
                #expect(gapless == ["SEARCH outbox USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"], "\(gapless)")
            }
        }
    }

    /// A plan its planner stopped moving on is discarded whole (the notification, its
    /// deliveries and payloads); one still moving is not, and a planner whose plan
    /// was discarded cannot add to it or complete it.
    @Test(arguments: StoreKind.allCases)
    func anUnfinishedPlanIsDiscardedWholeOnceItsMarkRunsOut(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for n in 1...5 { try await register(store, "u\(n)", n, company: "c") }
            try await enqueue(store, "done", [("u1", 1)])
            let notification = NewNotification(id: "q", type: "t", entityType: nil, entityID: nil, appType: "staff")
            try await store.beginFanOut(notification, now: 10, planningUntil: 1_000)
            let page = try await store.recipients(appType: "staff", company: "c", after: nil, limit: 10)
            let payloads = try await store.addFanOutPart(notification, oneEach("q", page), payloads: [:], now: 10,
                                                         planningUntil: 2_000)
            #expect(try await store.discardPlans(before: 2_000) == 0, "its mark was moved on")
            #expect(try await store.discardPlan(notificationID: "q", markBefore: 2_000) == .stillPlanning)
            #expect(try await store.discardPlans(before: 2_001) == 1)
            #expect(try await store.notification(id: "q") == nil)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE notification_id = 'q'") == 0)
            #expect(try await store.scalar("SELECT count(*) FROM payloads WHERE notification_id = 'q'") == 0)
            #expect(try await store.notification(id: "done") != nil, "a complete notification is never a plan")
            #expect(try await store.discardPlans(before: .max) == 0)
            await #expect(throws: StoreError.self) {
                _ = try await store.addFanOutPart(notification, oneEach("q2", page), payloads: payloads, now: 10,
                                                  planningUntil: 3_000)
            }
            await #expect(throws: StoreError.self) {
                try await store.completeFanOut(notification, held: [], payloads: payloads, now: 10)
            }
            #expect(try await store.outboxDepth() == 1)

            // Discarding one plan by its id (a planner whose write failed).
            let r = NewNotification(id: "r", type: "t", entityType: nil, entityID: nil, appType: "staff")
            try await store.beginFanOut(r, now: 10, planningUntil: 1_000)
            _ = try await store.addFanOutPart(r, oneEach("r", page), payloads: [:], now: 10, planningUntil: 1_000)
            #expect(try await store.discardPlan(notificationID: "done", markBefore: .max) == .noPlan)
            #expect(try await store.discardPlan(notificationID: "nobody", markBefore: .max) == .noPlan)
            #expect(try await store.discardPlan(notificationID: "r", markBefore: .max) == .discarded)
            #expect(try await store.notification(id: "r") == nil)
        }
    }

    /// A cancel of a notification still being planned changes nothing and says so:
    /// cancelling the parts written so far would let the rest go out at completion.
    /// Once complete, the same cancel takes every delivery back; and no
    /// `notification.completed` check completes a plan before it is complete.
    @Test(arguments: StoreKind.allCases)
    func aNotificationStillPlanningIsNotCancelledHalfWay(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for n in 1...6 { try await register(store, "u\(n)", n, company: "c") }
            let notification = NewNotification(id: "x", type: "t", entityType: nil, entityID: nil, appType: "staff")
            try await store.beginFanOut(notification, now: 10, planningUntil: 60_000)
            var payloads: [[UInt8]: Int64] = [:]
            let first = try await store.recipients(appType: "staff", company: "c", after: nil, limit: 3)
            payloads = try await store.addFanOutPart(notification, oneEach("x", first), payloads: payloads, now: 10,
                                                     planningUntil: 60_000)
            let found = try #require(try await store.cancelDeliveries(notificationID: "x", now: 20))
            #expect(found.planning)
            #expect(found.cancelled == 0)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE state = 'cancelled'") == 0)
            // A check of this notification (as a finish would record one) finds it pending.
            try await store.execute("INSERT INTO webhook_checks (notification_id, check_at) VALUES ('x', 0)")
            #expect(try await store.completeNotifications(limit: 10, recheckMillis: 1_000, now: 20) == 0)
            #expect(try await store.scalar("SELECT count(*) FROM webhook_checks WHERE notification_id = 'x'") == 1)

            let rest = try await store.recipients(appType: "staff", company: "c", after: first.last?.userID, limit: 3)
            payloads = try await store.addFanOutPart(notification, oneEach("x", rest), payloads: payloads, now: 10,
                                                     planningUntil: 60_000)
            try await store.completeFanOut(notification, held: [], payloads: payloads, now: 10)
            let cancelled = try #require(try await store.cancelDeliveries(notificationID: "x", now: 30))
            #expect(!cancelled.planning)
            #expect(cancelled.cancelled == 6, "every part")
            #expect(try await store.outboxDepth() == 0)
        }
    }

    /// A device's fan-out facts changing counts once; a re-registration that changes
    /// none of them counts nothing (it would only cost a later part its fast path).
    @Test(arguments: StoreKind.allCases)
    func deviceChangesCountWhatAFanOutRead(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let count = { try await store.scalar("SELECT generation FROM device_changes") }
            #expect(try await count() == 0)
            _ = try await register(store, "u1", 1, company: "c")
            _ = try await register(store, "u1", 1, company: "c", now: 5)
            #expect(try await count() == 0, "a new device and a plain re-registration")
            _ = try await register(store, "u2", 1, company: "c", now: 6)
            #expect(try await count() == 1, "another user's now")
            #expect(try await store.unregister(userID: "u2", token: token(1), now: 7))
            #expect(try await count() == 2)
        }
    }

    /// Texts bound in bulk (the enqueue's and the finish's multi-row statements) come
    /// back byte for byte: multi-byte characters, and an empty text as empty, not NULL.
    @Test(arguments: StoreKind.allCases)
    func bulkWrittenTextsRoundTrip(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let users = ["ünïçødé-👩‍🔧", "", "plain"]
            let deliveries = users.enumerated().map { i, user in
                NewDelivery(userID: user, deviceID: Int64(i + 1), token: token(i + 1), environment: "production",
                            apnsID: "t-\(i)", payload: Array(#"{"aps":{}}"#.utf8))
            }
            let claimed = try await store.enqueue(
                NewNotification(id: "t", type: "t", entityType: nil, entityID: nil, appType: "staff"), deliveries,
                now: 1, lease: OutboxLease(worker: "w", millis: 1_000))
            let reasons = ["Ünregistered ✓", "", "BadDeviceToken"]
            let outcomes = zip(claimed, reasons).map { c, reason in
                DeliveryOutcome(deliveryID: c.id, delivered: false, status: 400, reason: reason, timestamp: 2, attempts: 1)
            }
            #expect(try await store.finish(worker: "w", outcomes, now: 3) == 0)
            let log = try #require(try await store.notification(id: "t"))
            #expect(log.deliveries.map(\.userID) == users)
            #expect(log.deliveries.map(\.reason) == reasons)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anEnqueueWithHeldDeliveriesLeasesNone(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let deliveries = (0..<2).map { i in
                NewDelivery(userID: "u\(i)", deviceID: Int64(i), token: token(i), environment: "production",
                            apnsID: "later-\(i)", payload: Array(#"{"aps":{}}"#.utf8), notBefore: i == 0 ? nil : 5_000)
            }
            let claimed = try await store.enqueue(
                NewNotification(id: "later", type: "t", entityType: nil, entityID: nil, appType: "staff"), deliveries,
                now: 10, lease: OutboxLease(worker: "w", millis: 1_000))
            #expect(claimed.isEmpty)
            let now = try await store.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 20)
            #expect(now.map(\.delivery.apnsID) == ["later-0"])
            #expect(try await store.finish(worker: "w2", now.map { delivered($0.id) }, now: 30) == 0)
            #expect(try await store.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 4_999).isEmpty)
            #expect(try await store.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 5_000).map(\.delivery.apnsID)
                    == ["later-1"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func theHeadersTravelWithTheDelivery(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let sent = NewDelivery(userID: "u1", deviceID: 7, token: token(7), environment: "sandbox", apnsID: "a-1",
                                   payload: Array(repeating: 0x41, count: 4096), pushType: "background", priority: 5,
                                   collapseID: "c", expiration: 1_700_000_000)
            try await store.enqueue(NewNotification(id: "n", type: "t", entityType: nil, entityID: nil, appType: "customer"),
                                    [sent], now: 1)
            let claimed = try await store.claim(worker: "w", limit: 1, leaseMillis: 10, now: 1)
            #expect(claimed.map(\.delivery) == [sent])
            #expect(claimed.map(\.appType) == ["customer"])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func anExpiredLeaseGoesToAnotherWorkerWithTheSameApnsIDAndTheFirstWorkersFinishIsIgnored(
        _ kind: StoreKind
    ) async throws {
        try await withStore(kind, instances: 2) { stores in
            let (one, two) = (stores[0], stores[1])
            try await enqueueMany(one, "n", count: 1, now: 0)
            let first = try #require(try await one.claim(worker: "w1", limit: 10, leaseMillis: 1_000, now: 0).first)

            #expect(try await two.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 999).isEmpty)
            let again = try await two.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 1_000)
            #expect(again.map(\.id) == [first.id])
            #expect(again.map(\.delivery.apnsID) == [first.delivery.apnsID])

            #expect(try await one.finish(worker: "w1", [delivered(first.id, status: 410)], now: 1_100) == 1)
            #expect(try await one.delivery(apnsID: "n-0")?.state == "pending")
            #expect(try await one.outboxDepth() == 1)
            // w1 cannot renew, retry or release it either.
            try await one.renew(worker: "w1", deliveryIDs: [first.id], leaseMillis: 1_000_000, now: 1_100)
            try await one.retry(worker: "w1", deliveryID: first.id, environment: "sandbox", now: 1_100)
            try await one.release(worker: "w1", deliveryIDs: [first.id], availableAt: 0, now: 1_100)
            #expect(try await one.scalar("SELECT lease_until FROM outbox WHERE claimed_by = 'w2'") == 2_000)
            #expect(try await one.delivery(apnsID: "n-0")?.environment == "production")
            #expect(try await one.delivery(apnsID: "n-0")?.attempts == 0)

            #expect(try await two.finish(worker: "w2", [delivered(first.id)], now: 1_200) == 0)
            #expect(try await one.delivery(apnsID: "n-0")?.state == "delivered")
            #expect(try await one.outboxDepth() == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aLateFinishIsRecordedWhileNoOtherWorkerTookTheDelivery(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 1, now: 0)
            let id = try #require(try await store.claim(worker: "w1", limit: 1, leaseMillis: 1_000, now: 0).first?.id)
            // It was sent; recording it beats sending it again.
            #expect(try await store.finish(worker: "w1", [delivered(id)], now: 5_000) == 0)
            #expect(try await store.claim(worker: "w2", limit: 1, leaseMillis: 1_000, now: 5_000).isEmpty)
            #expect(try await store.delivery(apnsID: "n-0")?.state == "delivered")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func finishingTwiceLeavesOneFinalEntry(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let id = try await claimOneToARegisteredDevice(store)

            // Twice in one batch: the first counts, the second is ignored; so is a later batch.
            #expect(try await store.finish(worker: "w", [delivered(id, at: 15, attempts: 2),
                                                         delivered(id, status: 410, at: 16)], now: 20) == 1)
            #expect(try await store.finish(worker: "w", [delivered(id, status: 410, at: 25, attempts: 1)], now: 30) == 1)

            let view = try #require(try await store.delivery(apnsID: "n-0"))
            #expect(view == DeliveryView(notificationID: "n", userID: "u1", token: token(1), environment: "production",
                                         state: "delivered", apnsID: "n-0", status: 200, reason: nil, timestamp: 15,
                                         attempts: 2, finishedAt: 20, appType: "staff"))
            #expect(try await store.notification(id: "n")?.deliveries == [view])
            #expect(try await store.outboxDepth() == 0)
            // A success marks the token used.
            #expect(try await store.devices(userID: "u1").first?.lastUsedAt == 20)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aFailureIsRecordedWithItsReason(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let id = try await claimOneToARegisteredDevice(store)
            let outcome = DeliveryOutcome(deliveryID: id, delivered: false, status: 400, reason: "BadTopic", timestamp: 12,
                                          attempts: 1)
            #expect(try await store.finish(worker: "w", [outcome], now: 13) == 0)
            let view = try #require(try await store.delivery(apnsID: "n-0"))
            #expect(view.state == "failed" && view.status == 400 && view.reason == "BadTopic" && view.finishedAt == 13)
            #expect(try await store.devices(userID: "u1").first?.lastUsedAt == nil)
            #expect(try await store.devices(userID: "u1").count == 1)  // no token change asked: still active
        }
    }

    @Test(arguments: StoreKind.allCases)
    func renewExtendsOnlyTheLeasesThisWorkerHolds(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 2, now: 0)
            let mine = try await store.claim(worker: "w1", limit: 1, leaseMillis: 100, now: 0).map(\.id)
            let theirs = try await store.claim(worker: "w2", limit: 1, leaseMillis: 100, now: 0).map(\.id)

            try await store.renew(worker: "w1", deliveryIDs: mine + theirs, leaseMillis: 1_000, now: 50)
            let free = try await store.claim(worker: "w3", limit: 10, leaseMillis: 1_000_000, now: 500)
            #expect(free.map(\.id) == theirs)
            #expect(try await store.claim(worker: "w3", limit: 10, leaseMillis: 100, now: 1_050).map(\.id) == mine)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func retryPutsTheDeliveryBackForTheOtherEnvironmentWithItsApnsID(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 2)
            let first = try #require(try await store.claim(worker: "w1", limit: 1, leaseMillis: 60_000, now: 10).first)

            try await store.retry(worker: "w1", deliveryID: first.id, environment: "sandbox", now: 20)
            let again = try #require(try await store.claim(worker: "w2", limit: 1, leaseMillis: 60_000, now: 20).first)
            #expect(again.id == first.id)  // back at its place in line, lease free
            #expect(again.delivery.apnsID == first.delivery.apnsID)
            #expect(again.delivery.environment == "sandbox")
            #expect(again.crossEnvironmentTried)
            #expect(again.attempts == 1)
            #expect(try await store.delivery(apnsID: first.delivery.apnsID)?.state == "pending")
            #expect(try await store.outboxDepth() == 2)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aLargeFanOutStoresEachDistinctPayloadOnce(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            // 2,500 deliveries (three multi-row statements), two badge values.
            let deliveries = (0..<2_500).map { i in
                NewDelivery(userID: "u\(i)", deviceID: Int64(i), token: token(i), environment: "production",
                            apnsID: "big-\(i)", payload: Array(#"{"aps":{"badge":\#(i % 2)}}"#.utf8),
                            priority: i % 3 == 0 ? nil : 10, collapseID: i % 5 == 0 ? "c" : nil)
            }
            try await store.enqueue(NewNotification(id: "big", type: "t", entityType: nil, entityID: nil, appType: "staff"),
                                    deliveries, now: 1)
            #expect(try await store.scalar("SELECT count(*) FROM payloads") == 2)
            #expect(try await store.outboxDepth() == 2_500)
            var claimed: [ClaimedDelivery] = []
            while true {
                let batch = try await store.claim(worker: "w", limit: 1_000, leaseMillis: 60_000, now: 2)
                if batch.isEmpty { break }
                claimed += batch
            }
            #expect(claimed.map(\.delivery) == deliveries)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aClaimSaysWhetherTheDeviceIsStillWhatItWasAtEnqueue(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let kept = try await register(store, "u1", 1)
            let loggedOut = try await register(store, "u1", 2)
            let moved = try await register(store, "u1", 3)
            try await enqueue(store, "n", [("u1", kept), ("u1", loggedOut), ("u1", moved), ("u1", 999_999)])
            _ = try await store.unregister(userID: "u1", token: token(2), now: 2)
            try await store.register(registration("u9", 3), now: 2)

            let claimed = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 3)
            #expect(claimed.map(\.deviceActive) == [true, false, false, false])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func releaseGivesHeldDeliveriesBackFromALaterTimeWithTheAttemptCounted(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 2)
            let claimed = try await store.claim(worker: "w1", limit: 2, leaseMillis: 60_000, now: 10)
            try await store.release(worker: "w1", deliveryIDs: claimed.map(\.id), availableAt: 500, now: 20)
            #expect(try await store.claim(worker: "w2", limit: 10, leaseMillis: 60_000, now: 499).isEmpty)
            let again = try await store.claim(worker: "w2", limit: 10, leaseMillis: 60_000, now: 500)
            #expect(again.map(\.delivery.apnsID) == claimed.map(\.delivery.apnsID))
            #expect(again.map(\.attempts) == [1, 1])
        }
    }

    /// One meaning on both engines: a delivery is in the outbox exactly while it is
    /// to be sent (pending, with no answer); an answer from APNs is its `results`
    /// row, and `deliveries.state` keeps what the store decided (pending, batched).
    @Test(arguments: StoreKind.allCases)
    func aDeliveryIsUnfinishedExactlyWhileItIsInTheOutbox(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let unfinished = """
                SELECT count(*) FROM deliveries d
                WHERE d.state = 'pending' AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
                """
            try await enqueueMany(store, "n", count: 6)
            #expect(try await store.scalar(unfinished) == 6)
            #expect(try await store.scalar("SELECT count(*) FROM outbox") == 6)
            let claimed = try await store.claim(worker: "w", limit: 6, leaseMillis: 60_000, now: 2)
            #expect(try await store.finish(worker: "w", [delivered(claimed[0].id), delivered(claimed[1].id, status: 410)],
                                           now: 3) == 0)
            try await store.retry(worker: "w", deliveryID: claimed[2].id, environment: "sandbox", now: 3)
            try await store.unclaim(worker: "w", deliveryIDs: [claimed[3].id])
            #expect(try await store.scalar(unfinished) == 4)
            #expect(try await store.scalar("SELECT count(*) FROM outbox") == 4)
            #expect(try await store.scalar("SELECT count(*) FROM results") == 2)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE state <> 'pending'") == 0,
                    "an answer is not written over the log row")
            #expect(try await store.notification(id: "n")?.counts == ["delivered": 1, "failed": 1, "pending": 4])
        }
    }

}

/// One delivery per recipient device, apns-id `prefix-device`, one payload for all.
func oneEach(_ prefix: String, _ recipients: [Recipient]) -> [NewDelivery] {
    let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
    return recipients.flatMap { r in
        r.devices.map { d in
            NewDelivery(userID: r.userID, deviceID: d.id, token: d.token, environment: d.environment,
                        apnsID: "\(prefix)-\(d.id)", payload: payload)
        }
    }
}

/// The id lists SQLite's statements take (`json_each`), written digit by digit:
/// every sign and width, as JSON writes them.
@Test func idListsAreWrittenAsJSONArrays() {
    #expect(jsonArray([] as [Int64]) == "[]")
    #expect(jsonArray([0]) == "[0]")
    #expect(jsonArray([7, 10, -12, 1_234_567_890_123, .max, .min])
            == "[7,10,-12,1234567890123,9223372036854775807,-9223372036854775808]")
}
