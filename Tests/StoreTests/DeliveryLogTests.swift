import Foundation
import Testing
import TestSupport
@testable import Store

/// Reading the log a page at a time, on both stores: pages in log order, each with
/// the counts of the whole notification, and a cursor to the next until the last.
@Suite(.postgresCluster) struct DeliveryLogTests {
    @Test(arguments: StoreKind.allCases) func aNotificationIsReadAPageAtATimeWithCountsOfAll(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 7)
            let claimed = try await store.claim(worker: "w", limit: 3, leaseMillis: 60_000, now: 2)
            #expect(try await store.finish(worker: "w", [delivered(claimed[0].id), delivered(claimed[1].id),
                                                         delivered(claimed[2].id, status: 410)], now: 3) == 0)
            let all: [String: Int] = ["delivered": 2, "failed": 1, "pending": 4]

            var pages: [[String]] = []
            var after: Int64?
            repeat {
                let page = try #require(try await store.notification(id: "n", limit: 3, after: after))
                #expect(page.counts == all, "every page counts the whole notification")
                #expect(page.type == "order_created" && page.entityID == "o-n" && page.createdAt == 1)
                pages.append(page.deliveries.map(\.apnsID))
                after = page.next
            } while after != nil && pages.count < 10
            #expect(pages == [["n-0", "n-1", "n-2"], ["n-3", "n-4", "n-5"], ["n-6"]])

            let first = try #require(try await store.notification(id: "n", limit: 3, after: nil))
            #expect(first.deliveries.map(\.state) == ["delivered", "delivered", "failed"])
            #expect(first.deliveries.last?.status == 410 && first.deliveries.last?.reason == "Unregistered")

            // A page that ends exactly at the last delivery has no next.
            let exact = try #require(try await store.notification(id: "n", limit: 7, after: nil))
            #expect(exact.deliveries.count == 7 && exact.next == nil)
            let short = try #require(try await store.notification(id: "n", limit: 6, after: nil))
            #expect(short.deliveries.count == 6 && short.next != nil)
            // The whole notification at once (tests, small notifications).
            let whole = try #require(try await store.notification(id: "n"))
            #expect(whole.deliveries.map(\.apnsID) == (0..<7).map { "n-\($0)" } && whole.next == nil && whole.counts == all)
            // Past the end: an empty page, still counted.
            let past = try #require(try await store.notification(id: "n", limit: 3, after: Int64.max))
            #expect(past.deliveries.isEmpty && past.next == nil && past.counts == all)

            #expect(try await store.notification(id: "missing", limit: 3, after: nil) == nil)
            try await store.enqueue(NewNotification(id: "empty", type: "t", entityType: nil, entityID: nil, appType: "staff"),
                                    [], now: 4)
            let empty = try #require(try await store.notification(id: "empty", limit: 3, after: nil))
            #expect(empty.deliveries.isEmpty && empty.counts.isEmpty && empty.next == nil && empty.entityID == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeliveryIsFoundByItsApnsID(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "n", count: 2)
            let claimed = try await store.claim(worker: "w", limit: 1, leaseMillis: 60_000, now: 2)
            #expect(try await store.finish(worker: "w", [delivered(claimed[0].id, at: 9, attempts: 2)], now: 3) == 0)
            let done = try #require(try await store.delivery(apnsID: "n-0"))
            #expect(done == DeliveryView(notificationID: "n", userID: "u0", token: token(0), environment: "production",
                                         state: "delivered", apnsID: "n-0", status: 200, reason: nil, timestamp: 9,
                                         attempts: 2, finishedAt: 3, appType: "staff"))
            let waiting = try #require(try await store.delivery(apnsID: "n-1"))
            #expect(waiting.state == "pending" && waiting.status == nil && waiting.finishedAt == nil && waiting.attempts == 0)
            #expect(try await store.delivery(apnsID: "nope") == nil)
            #expect(try await store.outboxDepth() == 1)
            #expect(try await store.outboxWaiting(now: 2) == 0)
        }
    }
}
