import Foundation
import Testing
import TestSupport
@testable import Store

/// Schema v4 in the store: Live Activity tokens are devices the claim checks but
/// no fan-out or device listing sees; channels are one per key; broadcasts are
/// claimed under a lease and finished once, by their holder. Each runs on both stores.
@Suite(.postgresCluster) struct LiveActivityStoreTests {
    static func laToken(_ store: some TestStore, user: String, n: Int, kind: LiveActivityKind, now: Int64 = 1) async throws -> Int64 {
        try await store.registerLiveActivity(LiveActivityRegistration(userID: user, token: token(n), appType: "staff",
                                                                      kind: kind, attributesType: "Attrs"), now: now)
        return try #require(try await store.scalar("SELECT id FROM devices WHERE token = '\(token(n))'"))
    }

    @Test(arguments: StoreKind.allCases) func liveActivityTokensAreNeitherDevicesNorFanOutTargets(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await register(store, "u", 1, company: "c")
            let update = try await Self.laToken(store, user: "u", n: 2, kind: .update(activityID: "a1"))
            let start = try await Self.laToken(store, user: "u", n: 3, kind: .start)

            #expect(try await store.devices(userID: "u").count == 1)
            let recipients = try await store.recipients(appType: "staff", audience: .users(["u"]))
            #expect(recipients.first?.devices.map(\.token) == [token(1)])
            #expect(try await store.liveActivityTokens(userID: "u").map(\.id) == [start, update])
            #expect(try await store.liveActivityTokens(appType: "staff", .activity("a1")).map(\.id) == [update])
            #expect(try await store.liveActivityTokens(appType: "staff", .updateTokens(userIDs: ["u"], attributesType: nil)).map(\.id) == [update])
            #expect(try await store.liveActivityTokens(appType: "staff", .updateTokens(userIDs: ["u"], attributesType: "Other")).isEmpty)
            #expect(try await store.liveActivityTokens(appType: "staff", .startTokens(userIDs: ["u", "v"], attributesType: "Attrs")).map(\.id) == [start])
            #expect(try await store.liveActivityTokens(appType: "customer", .activity("a1")).isEmpty)

            // The claim sees a liveactivity delivery's token as active, and not once it is gone.
            try await store.enqueue(NewNotification(id: "n", type: "live_activity.update", entityType: nil, entityID: "a1",
                                                    appType: "staff"),
                                    [NewDelivery(userID: "u", deviceID: update, token: token(2), environment: "production",
                                                 apnsID: "la-1", payload: Array("{}".utf8), pushType: "liveactivity", priority: 5)],
                                    now: 1)
            let claimed = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 1)
            #expect(claimed.map(\.deviceActive) == [true])
            #expect(try await store.unregisterLiveActivity(userID: "x", token: token(2), now: 2) == false, "not x's")
            #expect(try await store.unregisterLiveActivity(userID: "u", token: token(2), now: 2))
            let again = try await store.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 1_001)
            #expect(again.map(\.deviceActive) == [false])
            #expect(try await store.liveActivityTokens(userID: "u").map(\.id) == [start])
            // An ios delivery to the Live Activity token's row is not active: one kind never reaches the other.
            try await store.enqueue(NewNotification(id: "n2", type: "t", entityType: nil, entityID: nil, appType: "staff"),
                                    [NewDelivery(userID: "u", deviceID: start, token: token(3), environment: "production",
                                                 apnsID: "alert-1", payload: Array("{}".utf8))], now: 3)
            let alert = try await store.claim(worker: "w3", limit: 10, leaseMillis: 1_000, now: 3)
            #expect(alert.first { $0.delivery.apnsID == "alert-1" }?.deviceActive == false)
        }
    }

    @Test(arguments: StoreKind.allCases) func channelsAreOnePerKeyAndBroadcastsFinishOnce(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
            let first = try await store.addChannel(ChannelRow(key: key, channelID: "AAAA", storagePolicy: 1, createdAt: 1), audience: nil)
            let second = try await store.addChannel(ChannelRow(key: key, channelID: "BBBB", storagePolicy: 0, createdAt: 2), audience: nil)
            #expect(first.channelID == "AAAA" && second == first, "the key keeps its first channel")
            #expect(try await store.channels(appType: "staff", environment: nil, entityType: "match").map(\.channelID) == ["AAAA"])
            #expect(try await store.channels(appType: "staff", environment: "sandbox", entityType: nil).isEmpty)

            try await store.enqueueBroadcast(NewBroadcast(id: "b1", channel: first, payload: Array("{}".utf8), priority: 10,
                                                          expiration: 0), now: 10)
            let a = try await store.claimBroadcasts(worker: "a", limit: 5, leaseMillis: 100, now: 10)
            #expect(a.map(\.broadcast.id) == ["b1"] && a.first?.attempts == 0)
            #expect(try await store.claimBroadcasts(worker: "b", limit: 5, leaseMillis: 100, now: 50).isEmpty, "leased")
            try await store.releaseBroadcast(worker: "a", id: "b1", availableAt: 200, now: 60)
            #expect(try await store.claimBroadcasts(worker: "b", limit: 5, leaseMillis: 100, now: 199).isEmpty, "backing off")
            let b = try await store.claimBroadcasts(worker: "b", limit: 5, leaseMillis: 100, now: 200)
            #expect(b.first?.attempts == 1)
            try await store.renewBroadcasts(worker: "a", ids: ["b1"], leaseMillis: 1_000, now: 250)  // not a's: no effect
            try await store.renewBroadcasts(worker: "b", ids: ["b1"], leaseMillis: 100, now: 290)
            #expect(try await store.claimBroadcasts(worker: "c", limit: 5, leaseMillis: 100, now: 389).isEmpty, "renewed to 390")
            #expect(try await store.claimBroadcasts(worker: "c", limit: 5, leaseMillis: 100, now: 390).map(\.broadcast.id) == ["b1"],
                    "and no further (a's renewal did nothing)")
            let outcome = BroadcastOutcome(id: "b1", delivered: true, status: 200, reason: nil, requestID: "r", uniqueID: "u",
                                           attempts: 2)
            #expect(try await !store.finishBroadcast(worker: "b", outcome, now: 400), "b no longer holds it")
            #expect(try await store.finishBroadcast(worker: "c", outcome, now: 400))
            #expect(try await !store.finishBroadcast(worker: "c", outcome, now: 401), "once")
            let view = try #require(try await store.broadcast(id: "b1"))
            #expect(view.state == "delivered" && view.requestID == "r" && view.uniqueID == "u" && view.attempts == 2)
            #expect(try await store.pendingBroadcasts() == 0)

            #expect(try await !store.removeChannel(key, channelID: "BBBB"), "only the channel it still has")
            #expect(try await store.removeChannel(key, channelID: "AAAA"))
            #expect(try await store.channel(key) == nil)
            #expect(try await store.broadcast(id: "b1") != nil, "the log outlives the channel")
        }
    }
}
