import Foundation
import Testing
import TestSupport
@testable import Store

/// Held deliveries in the store: a claim takes only due rows; a coalescing window
/// keeps one carrier per device and key, with every member in the log; a deferred
/// delivery is replaced by a later one with its collapse key; v3 keeps a v2 database.
/// Each behaviour runs on both stores.
@Suite(.postgresCluster) struct DueClaimTests {
    static func delivery(_ apnsID: String, device: Int64, payload: String = #"{"aps":{}}"#,
                         notBefore: Int64? = nil, hold: Hold? = nil) -> NewDelivery {
        NewDelivery(userID: "u\(device)", deviceID: device, token: token(Int(device)), environment: "production",
                    apnsID: apnsID, payload: Array(payload.utf8), notBefore: notBefore, hold: hold)
    }

    static func enqueue(_ store: some TestStore, _ id: String, _ deliveries: [NewDelivery], now: Int64) async throws {
        try await store.enqueue(NewNotification(id: id, type: "taskUpdate", entityType: "task", entityID: "job-1",
                                                appType: "field"), deliveries, now: now)
    }

    @Test(arguments: StoreKind.allCases) func aClaimTakesOnlyDueDeliveries(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await Self.enqueue(store, "n", [Self.delivery("now", device: 1),
                                                Self.delivery("later", device: 2, notBefore: 5_000)], now: 1_000)
            #expect(try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 1_000).map(\.delivery.apnsID) == ["now"])
            #expect(try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 4_999).isEmpty)
            #expect(try await store.outboxDepth() == 2, "held, not gone")
            let due = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 5_000)
            #expect(due.map(\.delivery.apnsID) == ["later"])
            #expect(due.first?.batched == 0)
            #expect(try await store.delivery(apnsID: "later")?.notBefore == 5_000)
            #expect(try await store.delivery(apnsID: "now")?.notBefore == nil)

            // On SQLite the claim walks the free rows' (available_at, delivery_id) index,
            // where held rows are further up and leased ones never are, and finds expired
            // leases by their own index: it never scans the outbox. (PostgreSQL's plan:
            // PostgresStoreTests.theClaimWalksOnlyFreeDueRowsOfItsPartialIndex.)
            if let sqlite = store as? SQLiteStore {
                let plan = try await sqlite.queryPlan(OutboxStatements.claimRead.sqlite, arguments: [1, 10])
                #expect(plan.contains { $0.contains("outbox USING INDEX outbox_free (available_at<") }, "\(plan)")
                #expect(plan.contains { $0.contains("outbox USING INDEX outbox_leased (lease_until<") }, "\(plan)")
                #expect(!plan.contains { $0.contains("SCAN outbox") }, "\(plan)")
            }
        }
    }

    /// /metrics' apns_server_outbox_oldest_due_seconds: a delivery not due yet is not
    /// waiting; one released for a later attempt is due again from then.
    @Test(arguments: StoreKind.allCases) func theOldestDueDeliveryIsTheOneDueLongest(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.outboxOldestDue(now: 1_000) == nil, "an empty outbox")
            try await Self.enqueue(store, "n1", [Self.delivery("later", device: 1, notBefore: 9_000)], now: 1_000)
            #expect(try await store.outboxOldestDue(now: 8_999) == nil, "not due yet")
            try await Self.enqueue(store, "n2", [Self.delivery("a", device: 2)], now: 2_000)
            try await Self.enqueue(store, "n3", [Self.delivery("b", device: 3)], now: 3_000)
            #expect(try await store.outboxOldestDue(now: 4_000) == 2_000)
            #expect(try await store.outboxOldestDue(now: 9_000) == 2_000)
            let a = try #require(try await store.claim(worker: "w", limit: 1, leaseMillis: 60_000, now: 4_000).first)
            #expect(a.delivery.apnsID == "a")
            try await store.release(worker: "w", deliveryIDs: [a.id], availableAt: 20_000, now: 4_500)
            #expect(try await store.outboxOldestDue(now: 5_000) == 3_000, "a waits for its retry")
            #expect(try await store.outboxOldestDue(now: 30_000) == 3_000)
        }
    }

    @Test(arguments: StoreKind.allCases) func aWindowHasOneCarrierAndKeepsEveryMember(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            func member(_ n: Int, device: Int64 = 1, key: String = "job-1", at now: Int64) -> NewDelivery {
                Self.delivery("m\(n)", device: device, payload: #"{"aps":{"alert":"v\#(n)"}}"#, notBefore: now + 60_000,
                              hold: Hold(kind: .coalesce(carrierAPNsID: "c\(n)", carrierCollapseID: "u|t|\(key)"),
                                         key: key, closesAt: now + 60_000))
            }
            try await Self.enqueue(store, "n0", [member(0, at: 0), member(1, device: 2, at: 0)], now: 0)
            try await Self.enqueue(store, "n1", [member(2, at: 10_000)], now: 10_000)
            try await Self.enqueue(store, "n2", [member(3, key: "job-2", at: 20_000)], now: 20_000)
            try await Self.enqueue(store, "n3", [member(4, at: 30_000)], now: 30_000)

            // Device 1's job-1 window: c0 carries m0, m2, m4; job-2 and device 2 have their own.
            for (m, c) in [("m0", "c0"), ("m2", "c0"), ("m4", "c0"), ("m1", "c1"), ("m3", "c3")] {
                let view = try #require(try await store.delivery(apnsID: m))
                #expect(view.state == "batched" && view.carriedBy == c && view.notBefore == nil, "\(m): \(view)")
            }
            #expect(try await store.delivery(apnsID: "c2") == nil, "m2 joined, opened nothing")
            #expect(try await store.delivery(apnsID: "c0")?.batched == 3)
            #expect(try await store.outboxDepth() == 3, "carriers only")
            #expect(try await store.outboxWaiting(now: 59_999) == 3)
            #expect(try await store.outboxWaiting(now: 60_000) == 1, "job-2's window closes at 80 s")
            #expect(try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 59_999).isEmpty)
            let closed = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 60_000)
            #expect(closed.map(\.delivery.apnsID) == ["c0", "c1"])
            let c0 = try #require(closed.first)
            #expect(c0.batched == 3 && c0.delivery.collapseID == "u|t|job-1")
            #expect(c0.delivery.payload == Array(#"{"aps":{"alert":"v4"}}"#.utf8), "the latest member's payload")

            // A claimed carrier's window takes no one: a newcomer opens the next window.
            try await Self.enqueue(store, "n4", [member(5, at: 59_000)], now: 59_000)
            #expect(try await store.delivery(apnsID: "m5")?.carriedBy == "c5")
            #expect(try await store.delivery(apnsID: "c5")?.batched == 1)
            _ = try await store.finish(worker: "w", [delivered(c0.id)], now: 61_000)
            #expect(try await store.delivery(apnsID: "c0")?.state == "delivered")
            #expect(try await store.delivery(apnsID: "m0")?.state == "batched", "members stay in the log")
        }
    }

    /// A member held past its window's close (quiet hours began meanwhile) holds the
    /// window's one send until then; the window keeps its own close for everyone else.
    @Test(arguments: StoreKind.allCases) func aMemberHeldPastTheCloseHoldsTheCarrier(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            func member(_ n: Int, notBefore: Int64) -> NewDelivery {
                Self.delivery("m\(n)", device: 1, payload: #"{"aps":{"alert":"v\#(n)"}}"#, notBefore: notBefore,
                              hold: Hold(kind: .coalesce(carrierAPNsID: "c\(n)", carrierCollapseID: "u|t|k"),
                                         key: "k", closesAt: 60_000))
            }
            try await Self.enqueue(store, "n0", [member(0, notBefore: 60_000)], now: 0)
            try await Self.enqueue(store, "n1", [member(1, notBefore: 90_000)], now: 10_000)
            try await Self.enqueue(store, "n2", [member(2, notBefore: 60_000)], now: 20_000)

            let carrier = try #require(try await store.delivery(apnsID: "c0"))
            #expect(carrier.batched == 3 && carrier.notBefore == 90_000, "\(carrier)")
            #expect(try await store.delivery(apnsID: "m1")?.carriedBy == "c0")
            #expect(try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 89_999).isEmpty)
            let sent = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 90_000)
            #expect(sent.map(\.delivery.apnsID) == ["c0"])
            #expect(sent.first?.delivery.payload == Array(#"{"aps":{"alert":"v2"}}"#.utf8), "the latest member's payload")
        }
    }

    @Test(arguments: StoreKind.allCases) func aLaterDeferredDeliveryReplacesTheHeldOne(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            func deferred(_ id: String, device: Int64 = 1, key: String = "trip-1") -> NewDelivery {
                Self.delivery(id, device: device, notBefore: 80_000, hold: Hold(kind: .defer, key: key, closesAt: 80_000))
            }
            try await Self.enqueue(store, "n0", [deferred("a"), deferred("other-device", device: 2)], now: 0)
            try await Self.enqueue(store, "n1", [deferred("b")], now: 1_000)
            try await Self.enqueue(store, "n2", [deferred("c", key: "trip-2")], now: 2_000)
            let a = try #require(try await store.delivery(apnsID: "a"))
            #expect(a.state == "superseded" && a.carriedBy == "b" && a.finishedAt == 1_000)
            #expect(try await store.outboxDepth() == 3)
            let due = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 80_000)
            #expect(Set(due.map(\.delivery.apnsID)) == ["other-device", "b", "c"])
        }
    }

    /// A database at v2 with a log, an outbox (one row free, one leased) and
    /// preferences comes through v3 and every later step whole.
    @Test(arguments: StoreKind.allCases) func version3KeepsAVersion2Database(_ kind: StoreKind) async throws {
        try await withStore(kind, migratedThrough: 2) { store in
            // The one spelling that differs: a bytes literal.
            func bytes(_ hex: String) -> String { kind == .sqlite ? "x'\(hex)'" : "'\\x\(hex)'" }
            for statement in [
                "INSERT INTO notifications VALUES ('n', 'order_created', 'order', 'o1', 'staff', 1)",
                "INSERT INTO payloads (id, notification_id, bytes) VALUES (7, 'n', \(bytes("7b7d")))",
                """
                INSERT INTO deliveries (id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                                        push_type, created_at, payload_id, state, status, finished_at)
                    VALUES (1, 'n', 'u', 1, 't', 'production', 'done', \(bytes("")), 'alert', 1, 7, 'delivered', 200, 2),
                           (2, 'n', 'u', 2, 't2', 'production', 'waiting', \(bytes("")), 'alert', 1, 7, 'pending', NULL, NULL),
                           (3, 'n', 'u', 3, 't3', 'production', 'held', \(bytes("")), 'alert', 1, 7, 'pending', NULL, NULL)
                """,
                "INSERT INTO outbox (delivery_id, available_at, lease_until, claimed_by) VALUES (2, 1, NULL, NULL), (3, 1, 100, 'gone')",
                "INSERT INTO preferences VALUES ('u', 'staff', 'newEnquiry', false, 1)",
                """
                INSERT INTO devices (id, user_id, app_type, token, platform, environment, registered_at, created_at,
                                     updated_at, last_used_at)
                    VALUES (1, 'u', 'staff', 't', 'ios', 'production', 1, 1, 1, 3)
                """,
            ] {
                try await store.execute(statement)
            }
            try await store.migrate()
            #expect(try await store.schemaVersion() == Int64(Schema.steps.count), "v3 and every later step")
            #expect(try await store.delivery(apnsID: "done")?.state == "delivered")
            #expect(try await store.devices(userID: "u").first?.lastUsedAt == 3, "v9 moved it to device_use")
            #expect(try await store.preferences(userID: "u", appType: "staff") == ["newEnquiry": false])
            let claimed = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 5)
            #expect(claimed.map(\.delivery.apnsID) == ["waiting"], "the other is still leased")
            #expect(claimed.first?.delivery.payload == Array("{}".utf8))
            if kind == .sqlite {
                #expect(try await store.scalar("SELECT count(*) FROM pragma_foreign_key_check") == 0)
            } else {
                #expect(try await store.scalar("""
                    SELECT count(*) FROM pg_indexes WHERE tablename = 'outbox' AND indexname IN ('outbox_free', 'outbox_leased')
                    """) == 2, "the claim's indexes are partial")
            }

            // An answer from before v8, written in its log row, moved to `results` (v12),
            // where a finish now writes: the log reads both alike.
            #expect(try await store.finish(worker: "w", [delivered(2, status: 410, at: 6, attempts: 1)], now: 7) == 0)
            #expect(try await store.scalar("SELECT count(*) FROM results") == 2)
            let log = try #require(try await store.notification(id: "n"))
            #expect(log.counts == ["delivered": 1, "failed": 1, "pending": 1])
            #expect(log.deliveries.map(\.state) == ["delivered", "failed", "pending"])
            #expect(log.deliveries.map(\.status) == [200, 410, nil])
            #expect(log.deliveries.map(\.finishedAt) == [2, 7, nil])
            let waiting = try #require(try await store.delivery(apnsID: "waiting"))
            #expect(waiting.reason == "Unregistered" && waiting.timestamp == 6 && waiting.attempts == 1)
            #expect(try await store.finish(worker: "w", [delivered(2)], now: 8) == 1, "final once")

            let late = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 100)
            #expect(late.map(\.delivery.apnsID) == ["held"], "its lease ran out")
            #expect(late.first?.delivery.payload == Array("{}".utf8))

            // Text preferences now sit beside toggles.
            try await store.updatePreferences(userID: "u", appType: "staff", ["timeZone": "Europe/London", "newEnquiry": true], now: 9)
            #expect(try await store.preferences(userID: "u", appType: "staff") == ["timeZone": "Europe/London", "newEnquiry": true])
        }
    }
}
