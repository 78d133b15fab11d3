import Foundation
import Testing
import TestSupport
@testable import Store

/// Cancelling a notification already fanned out (`DeliveryCancellation`), one body
/// on both stores: what waits (due, held, back for a retry) is cancelled, what a
/// worker holds or already sent is counted and left; a coalescing carrier shared
/// with another notification goes on for it alone; and a claim racing a cancel
/// never takes a delivery the cancel took, nor loses one.
@Suite(.postgresCluster) struct CancelDeliveriesTests {
    static func notification(_ id: String) -> NewNotification {
        NewNotification(id: id, type: "eventReminder", entityType: "event", entityID: "e-1", appType: "field")
    }

    @Test(arguments: StoreKind.allCases) func whatWaitsIsCancelledWhatWentIsCounted(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.cancelDeliveries(notificationID: "none", now: 1) == nil)
            try await store.enqueue(Self.notification("n"), [
                DueClaimTests.delivery("inflight", device: 1),
                DueClaimTests.delivery("sent", device: 2),
                DueClaimTests.delivery("retrying", device: 3),
                DueClaimTests.delivery("held", device: 4, notBefore: 90_000),
                DueClaimTests.delivery("due", device: 5),
            ], now: 1_000)
            let inFlight = try await store.claim(worker: "w", limit: 1, leaseMillis: 600_000, now: 1_000)
            let sent = try await store.claim(worker: "w", limit: 1, leaseMillis: 600_000, now: 1_000)
            let retrying = try await store.claim(worker: "w", limit: 1, leaseMillis: 600_000, now: 1_000)
            #expect((inFlight + sent + retrying).map(\.delivery.apnsID) == ["inflight", "sent", "retrying"])
            #expect(try await store.finish(worker: "w", [delivered(sent[0].id)], now: 1_100) == 0)
            try await store.release(worker: "w", deliveryIDs: [retrying[0].id], availableAt: 5_000, now: 1_100)

            let found = try await store.cancelDeliveries(notificationID: "n", now: 2_000)
            #expect(found == CancelledDeliveries(cancelled: 3, alreadySent: 1, inFlight: 1))
            for apnsID in ["retrying", "held", "due"] {
                let view = try #require(try await store.delivery(apnsID: apnsID))
                #expect(view.state == "cancelled" && view.finishedAt == 2_000, "\(apnsID): \(view)")
            }
            #expect(try await store.delivery(apnsID: "inflight")?.state == "pending")
            #expect(try await store.delivery(apnsID: "sent")?.state == "delivered")
            #expect(try await store.outboxDepth() == 1, "only the one a worker holds")
            #expect(try await store.claim(worker: "w2", limit: 10, leaseMillis: 60_000, now: 100_000).isEmpty,
                    "nothing cancelled is claimed, even once due; the held one's lease stands")
            #expect(try await store.finish(worker: "w", [delivered(inFlight[0].id)], now: 2_100) == 0)
            let counts = try #require(try await store.notification(id: "n")).counts
            #expect(counts == ["cancelled": 3, "delivered": 2], "\(counts)")
            #expect(try await store.cancelDeliveries(notificationID: "n", now: 3_000)
                        == CancelledDeliveries(cancelled: 0, alreadySent: 2, inFlight: 0), "again: nothing more")
        }
    }

    /// Three coalescing windows: device 1's opened by n0 and joined by n1 (n1 is
    /// cancelled: the carrier goes on with n0's payload); device 2's opened by n2 and
    /// joined by n3 (n2 is cancelled: the carrier goes on with n3's payload, in n3's
    /// log); device 3's only n4's (cancelled with it).
    @Test(arguments: StoreKind.allCases) func aSharedCarrierGoesOnForTheOtherNotification(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            func member(_ n: Int, device: Int64) -> NewDelivery {
                DueClaimTests.delivery("m\(n)", device: device, payload: #"{"aps":{"alert":"v\#(n)"}}"#,
                                       notBefore: 60_000,
                                       hold: Hold(kind: .coalesce(carrierAPNsID: "c\(n)", carrierCollapseID: "u|t|k"),
                                                  key: "k", closesAt: 60_000))
            }
            try await store.enqueue(Self.notification("n0"), [member(0, device: 1)], now: 0)
            try await store.enqueue(Self.notification("n1"), [member(1, device: 1)], now: 10)
            try await store.enqueue(Self.notification("n2"), [member(2, device: 2)], now: 20)
            try await store.enqueue(Self.notification("n3"), [member(3, device: 2)], now: 30)
            try await store.enqueue(Self.notification("n4"), [member(4, device: 3)], now: 40)
            #expect(try await store.delivery(apnsID: "c0")?.batched == 2)
            #expect(try await store.delivery(apnsID: "c2")?.batched == 2)

            #expect(try await store.cancelDeliveries(notificationID: "n1", now: 100)
                        == CancelledDeliveries(cancelled: 1, alreadySent: 0, inFlight: 0))
            #expect(try await store.cancelDeliveries(notificationID: "n2", now: 100)
                        == CancelledDeliveries(cancelled: 1, alreadySent: 0, inFlight: 0))
            #expect(try await store.cancelDeliveries(notificationID: "n4", now: 100)
                        == CancelledDeliveries(cancelled: 2, alreadySent: 0, inFlight: 0), "its carrier and its member")
            for m in ["m1", "m2", "m4", "c4"] {
                let view = try #require(try await store.delivery(apnsID: m))
                #expect(view.state == "cancelled" && view.carriedBy == nil, "\(m): \(view)")
            }
            #expect(try await store.delivery(apnsID: "m0")?.carriedBy == "c0")
            #expect(try await store.delivery(apnsID: "m3")?.carriedBy == "c2")
            #expect(try await store.notification(id: "n2")?.deliveries.map(\.apnsID) == ["m2"])
            #expect(try await store.notification(id: "n3")?.deliveries.map(\.apnsID).sorted() == ["c2", "m3"])
            #expect(try await store.outboxDepth() == 2)

            let sent = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 60_000)
            #expect(sent.map(\.delivery.apnsID) == ["c0", "c2"])
            #expect(sent.map(\.batched) == [1, 1])
            #expect(sent.map(\.notificationID) == ["n0", "n3"])
            #expect(sent.map { String(decoding: $0.delivery.payload, as: UTF8.self) }
                        == [#"{"aps":{"alert":"v0"}}"#, #"{"aps":{"alert":"v3"}}"#], "the latest member still carried")
        }
    }

    /// A worker claiming and another instance cancelling at once, many times over:
    /// every delivery is either claimed or cancelled, never both, never neither, and
    /// the cancel's count of those in flight is the claimer's.
    @Test(arguments: StoreKind.allCases) func aClaimRacingACancelTakesEachDeliveryOnce(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 2) { stores in
            let (claimer, canceller) = (stores[0], stores[1])
            for round in 0..<15 {
                let id = "race-\(round)"
                let deliveries = (0..<12).map { DueClaimTests.delivery("\(id)-\($0)", device: Int64($0 + 1)) }
                try await claimer.enqueue(Self.notification(id), deliveries, now: 1_000)
                async let cancel = canceller.cancelDeliveries(notificationID: id, now: 1_000)
                var claimed: [ClaimedDelivery] = []
                for _ in 0..<8 {
                    claimed += try await claimer.claim(worker: "w", limit: 2, leaseMillis: 600_000, now: 1_000)
                }
                let found = try #require(try await cancel)
                claimed += try await claimer.claim(worker: "w", limit: 100, leaseMillis: 600_000, now: 1_000)

                let view = try #require(try await claimer.notification(id: id))
                let cancelled = Set(view.deliveries.filter { $0.state == "cancelled" }.map(\.apnsID))
                let taken = Set(claimed.map(\.delivery.apnsID))
                #expect(taken.count == claimed.count, "round \(round): a delivery claimed twice")
                #expect(cancelled.isDisjoint(with: taken), "round \(round): claimed and cancelled")
                #expect(cancelled.union(taken) == Set(deliveries.map(\.apnsID)), "round \(round): one lost")
                #expect(found == CancelledDeliveries(cancelled: cancelled.count, alreadySent: 0, inFlight: taken.count),
                        "round \(round)")
                #expect(try await claimer.finish(worker: "w", claimed.map { delivered($0.id) }, now: 1_100) == 0)
                #expect(try await claimer.outboxDepth() == 0)
            }
        }
    }
}
