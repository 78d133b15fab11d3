import Foundation
import Testing
import TestSupport
@testable import Store

/// Retention (issue #11: "Retention of the log is configurable"): what is old and
/// final leaves the log a batch at a time; nothing pending is ever pruned. On both stores.
@Suite(.postgresCluster) struct RetentionTests {
    /// Old and final goes with its deliveries and payloads; old with a delivery still
    /// pending stays whole; new stays; `limit` bounds one call.
    @Test(arguments: StoreKind.allCases) func oldFinishedNotificationsGoAndPendingOnesStay(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for n in 0..<3 { try await enqueue(store, "old\(n)", [(user: "u", device: Int64(n))], now: 1_000 + Int64(n)) }
            try await enqueue(store, "stuck", [(user: "u", device: 10), (user: "u", device: 11)], now: 1_000)
            try await enqueue(store, "new", [(user: "u", device: 20)], now: 50_000)
            let claimed = try await store.claim(worker: "w", limit: 100, leaseMillis: 60_000, now: 60_000)
            let finals = claimed.filter { $0.delivery.apnsID != "stuck-1" }.map { delivered($0.id) }
            #expect(try await store.finish(worker: "w", finals, now: 60_000) == 0)

            let first = try await store.pruneLog(before: 10_000, limit: 2)
            #expect(first == PruneResult(notifications: 2, deliveries: 2, broadcasts: 0), "oldest first, two at most")
            let second = try await store.pruneLog(before: 10_000, limit: 2)
            #expect(second == PruneResult(notifications: 1, deliveries: 1, broadcasts: 0), "stuck is not final: kept")
            #expect(try await store.pruneLog(before: 10_000, limit: 2).isEmpty)

            for n in 0..<3 { #expect(try await store.notification(id: "old\(n)") == nil) }
            #expect(try await store.delivery(apnsID: "old0-0") == nil)
            let stuck = try #require(try await store.notification(id: "stuck"))
            #expect(stuck.deliveries.count == 2, "a pending delivery keeps its whole notification")
            #expect(try await store.notification(id: "new") != nil)
            #expect(try await store.scalar("SELECT count(*) FROM payloads WHERE notification_id LIKE 'old%'") == 0)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE notification_id LIKE 'old%'") == 0)
            #expect(try await store.outboxDepth() == 1, "the pending one is still to be sent")

            // Once final it goes too.
            let rest = claimed.filter { $0.delivery.apnsID == "stuck-1" }.map { delivered($0.id) }
            #expect(try await store.finish(worker: "w", rest, now: 61_000) == 0)
            #expect(try await store.pruneLog(before: 10_000, limit: 10) == PruneResult(notifications: 1, deliveries: 2))
            if kind == .sqlite {
                #expect(try await store.scalar("SELECT count(*) FROM results") == 1, "only new's answer is left")
            }
        }
    }

    /// A batched member of a newer notification whose carrier was pruned keeps its
    /// state and loses only the pointer (the foreign key would refuse the delete).
    @Test(arguments: StoreKind.allCases) func aPrunedCarrierLeavesItsNewerMembersInTheLog(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            func member(_ n: Int) -> NewDelivery {
                DueClaimTests.delivery("m\(n)", device: 1, notBefore: 60_000,
                                       hold: Hold(kind: .coalesce(carrierAPNsID: "c\(n)", carrierCollapseID: "k"),
                                                  key: "job", closesAt: 60_000))
            }
            try await DueClaimTests.enqueue(store, "n0", [member(0)], now: 0)
            try await DueClaimTests.enqueue(store, "n1", [member(1)], now: 20_000)
            #expect(try await store.delivery(apnsID: "m1")?.carriedBy == "c0")
            let carrier = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 60_000)
            #expect(carrier.map(\.delivery.apnsID) == ["c0"])
            _ = try await store.finish(worker: "w", carrier.map { delivered($0.id) }, now: 61_000)

            #expect(try await store.pruneLog(before: 10_000, limit: 10) == PruneResult(notifications: 1, deliveries: 2))
            #expect(try await store.delivery(apnsID: "c0") == nil)
            let m1 = try #require(try await store.delivery(apnsID: "m1"))
            #expect(m1.state == "batched" && m1.carriedBy == nil)
        }
    }

    /// Final broadcasts finished before the cutoff go; pending ones stay.
    @Test(arguments: StoreKind.allCases) func finishedBroadcastsGoPendingOnesStay(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let channel = ChannelRow(key: ChannelKey(appType: "travel", environment: "production", entityType: "trip",
                                                     entityID: "t1"), channelID: "ch", storagePolicy: 0, createdAt: 0)
            for id in ["done", "waiting"] {
                try await store.enqueueBroadcast(NewBroadcast(id: id, channel: channel, payload: Array(#"{"aps":{}}"#.utf8),
                                                              priority: nil, expiration: 0), now: 1_000)
            }
            let claimed = try await store.claimBroadcasts(worker: "w", limit: 1, leaseMillis: 60_000, now: 1_000)
            let id = try #require(claimed.first?.broadcast.id)
            #expect(try await store.finishBroadcast(worker: "w", BroadcastOutcome(
                id: id, delivered: true, status: 200, reason: nil, requestID: "r", uniqueID: "u", attempts: 1), now: 2_000))
            #expect(try await store.pruneLog(before: 2_000, limit: 10).isEmpty, "finished at the cutoff, not before")
            #expect(try await store.pruneLog(before: 2_001, limit: 10) == PruneResult(broadcasts: 1))
            #expect(try await store.broadcast(id: id) == nil)
            #expect(try await store.pendingBroadcasts() == 1)
        }
    }

    /// On SQLite, pruning reaches its rows through indexes, never a scan of the log.
    @Test func pruningWalksIndexes() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let store = try await makeStore(scratch)
        let byAge = try await store.queryPlan("SELECT id FROM notifications WHERE created_at < 5 ORDER BY created_at LIMIT 10")
        #expect(byAge.contains { $0.contains("notifications_by_age") }, "\(byAge)")
        let payloads = try await store.queryPlan("SELECT id FROM payloads WHERE notification_id = 'n'")
        #expect(payloads.contains { $0.contains("payloads_by_notification") }, "\(payloads)")
        let members = try await store.queryPlan("SELECT id FROM deliveries WHERE carried_by = 5")
        #expect(members.contains { $0.contains("deliveries_by_carrier") }, "\(members)")
    }
}
