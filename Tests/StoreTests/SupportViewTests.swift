import Foundation
import Testing
import TestSupport
@testable import Store

/// What support looks up, on both stores: newest first, a page at a time, every
/// item once even when several share a time.
@Suite(.postgresCluster) struct SupportViewTests {
    @Test(arguments: StoreKind.allCases) func recentNotificationsComeNewestFirstThroughTies(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await enqueueMany(store, "e", count: 1, now: 3)
            for id in ["a", "c", "b"] { try await enqueueMany(store, id, count: 2, now: 5) }
            try await enqueueMany(store, "d", count: 1, now: 7)
            let claimed = try await store.claim(worker: "w", limit: 10, leaseMillis: 60_000, now: 8)
            let c0 = try #require(claimed.first { $0.delivery.apnsID == "c-0" })
            let c1 = try #require(claimed.first { $0.delivery.apnsID == "c-1" })
            _ = try await store.finish(worker: "w", [delivered(c0.id), delivered(c1.id, status: 410)], now: 9)

            var pages: [[String]] = []
            var before: TimeCursor?
            repeat {
                let page = try await store.recentNotifications(limit: 2, before: before)
                pages.append(page.items.map(\.id))
                if let c = page.items.first(where: { $0.id == "c" }) {
                    #expect(c.counts == ["delivered": 1, "failed": 1] && c.type == "order_created" && c.appType == "staff")
                    #expect(c.createdAt == 5 && c.entityID == "o-c")
                }
                if let b = page.items.first(where: { $0.id == "b" }) { #expect(b.counts == ["pending": 2]) }
                before = page.next
            } while before != nil && pages.count < 10
            #expect(pages == [["d", "c"], ["b", "a"], ["e"]])
            #expect(try await store.recentNotifications(limit: 5, before: nil).next == nil)
            #expect(TimeCursor(text: TimeCursor(millis: 5, id: "x.y").text) == TimeCursor(millis: 5, id: "x.y"))
        }
    }

    @Test(arguments: StoreKind.allCases) func deactivatedTokensComeMostRecentFirstSinceATime(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            var ids: [String: Int64] = [:]
            for (i, user) in ["u1", "u2", "u3", "u4"].enumerated() { ids[user] = try await register(store, user, i + 1) }
            let spare = try await register(store, "u1", 9, now: 2)
            #expect(try await store.unregister(userID: "u1", token: token(1), now: 100))
            #expect(try await store.unregister(userID: "u2", token: token(2), now: 100))
            #expect(try await store.unregister(userID: "u3", token: token(3), now: 200))

            var seen: [Int64] = []
            var before: TimeCursor?
            repeat {
                let page = try await store.deactivatedDevices(since: 0, limit: 1, before: before)
                seen += page.items.map(\.id)
                before = page.next
            } while before != nil && seen.count < 10
            #expect(seen == [ids["u3"]!, ids["u2"]!, ids["u1"]!], "newest first; a tie by id, highest first")
            let recent = try await store.deactivatedDevices(since: 150, limit: 10, before: nil)
            #expect(recent.items.map(\.userID) == ["u3"] && recent.next == nil)
            #expect(recent.items[0].deactivatedReason == "unregistered" && recent.items[0].deactivatedAt == 200)

            // A user's devices: the active first, the others with why and when.
            let devices = try await store.userDevices(userID: "u1")
            #expect(devices.map(\.id) == [spare, ids["u1"]!])
            #expect(devices.map(\.isActive) == [true, false])
            #expect(devices[1].deactivatedReason == "unregistered" && devices[1].token == token(1)
                    && devices[1].environment == "production" && devices[1].appType == "staff")
            #expect(try await store.userDevices(userID: "nobody").isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func aUsersDeliveriesComeNewestFirst(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for id in ["n1", "n2", "n3"] { try await enqueue(store, id, [("u1", 1), ("u2", 2)]) }
            var pages: [[String]] = []
            var before: Int64?
            repeat {
                let page = try await store.userDeliveries(userID: "u1", limit: 2, before: before)
                pages.append(page.items.map(\.apnsID))
                #expect(page.items.allSatisfy { $0.userID == "u1" && $0.state == "pending" })
                before = page.next
            } while before != nil && pages.count < 10
            #expect(pages == [["n3-0", "n2-0"], ["n1-0"]])
            #expect(try await store.userDeliveries(userID: "nobody", limit: 2, before: nil).items.isEmpty)
        }
    }
}
