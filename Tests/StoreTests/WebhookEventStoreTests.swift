import Foundation
import Testing
import TestSupport
@testable import Store

/// Webhook events in the store, on both: written in the transaction of the change
/// they report (for the receivers that want them, once), claimed like an outbox,
/// retried, failed, listed.
@Suite(.postgresCluster) struct WebhookEventStoreTests {
    static let routes = WebhookRoutes([
        .init(url: "http://r1", events: Set(WebhookEventType.allCases)),
        .init(url: "http://r2", events: [.deliveryFailed]),
    ])

    static func events(_ store: some TestStore) async throws -> [String] {
        try await store.texts("SELECT endpoint || ' ' || type || ' ' || subject FROM webhook_events ORDER BY id")
            .map { $0[0] ?? "" }
    }

    @Test(arguments: StoreKind.allCases)
    func eventsAreWrittenWithTheChangeThatCausesThem(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            store.routeWebhooks(Self.routes)
            let d1 = try await register(store, "u1", 1), d2 = try await register(store, "u2", 2)
            try await enqueue(store, "n", [("u1", d1), ("u2", d2)])
            try await enqueue(store, "later", [("u1", d1)], now: 2)
            let claimed = try await store.claim(worker: "w", limit: 2, leaseMillis: 1_000, now: 10)
            #expect(claimed.map(\.delivery.apnsID) == ["n-0", "n-1"])
            _ = try await store.finish(worker: "w", [
                delivered(claimed[0].id, at: 11),
                delivered(claimed[1].id, status: 410, at: 7, .deactivate(reason: "Unregistered", registeredBefore: 7)),
            ], now: 12)
            let failedID = claimed[1].id
            #expect(try await Self.events(store) == [
                "http://r1 token.deactivated device:\(d2):12",
                "http://r1 delivery.failed delivery:\(failedID)", "http://r2 delivery.failed delivery:\(failedID)",
            ])
            let data = try #require(try await store.texts("""
                SELECT data FROM webhook_events WHERE type = 'token.deactivated'
                """).first?[0])
            let deactivated = try #require(try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])
            #expect(deactivated["token"] as? String == token(2) && deactivated["user_id"] as? String == "u2")
            #expect(deactivated["reason"] as? String == "Unregistered" && deactivated["app_type"] as? String == "staff")
            #expect(deactivated["apns_timestamp"] as? String == "1970-01-01T00:00:00.007Z")
            #expect(deactivated["deactivated_at"] as? String == "1970-01-01T00:00:00.012Z")

            // Complete once nothing is pending: once, however often looked at.
            #expect(try await store.completeNotifications(limit: 10, recheckMillis: 1_000, now: 13) == 1)
            #expect(try await store.completeNotifications(limit: 10, recheckMillis: 1_000, now: 14) == 0)
            let completed = try #require(try await store.texts("""
                SELECT data FROM webhook_events WHERE type = 'notification.completed'
                """).first?[0])
            let summary = try #require(try JSONSerialization.jsonObject(with: Data(completed.utf8)) as? [String: Any])
            #expect(summary["notification_id"] as? String == "n")
            #expect(summary["summary"] as? [String: Int] == ["delivered": 1, "failed": 1])
            #expect(try await store.scalar("SELECT count(*) FROM webhook_checks") == 0)

            // A notification of two, one still pending: looked at again later, not completed.
            try await enqueue(store, "two", [("u1", d1), ("u1", d1)], now: 20)
            let laterAndTwo = try await store.claim(worker: "w", limit: 3, leaseMillis: 1_000, now: 21)
            let two = laterAndTwo.filter { $0.notificationID == "two" }
            _ = try await store.finish(worker: "w", [delivered(two[0].id)], now: 22)
            #expect(try await store.completeNotifications(limit: 10, recheckMillis: 1_000, now: 23) == 0)
            #expect(try await store.scalar("SELECT check_at FROM webhook_checks WHERE notification_id = 'two'") == 1_023)
            _ = try await store.finish(worker: "w", [delivered(two[1].id)], now: 24)
            #expect(try await store.completeNotifications(limit: 10, recheckMillis: 1_000, now: 25) == 1)

            // Nobody asked: nothing is written.
            store.routeWebhooks(WebhookRoutes())
            let last = try #require(laterAndTwo.first { $0.notificationID == "later" })
            _ = try await store.finish(worker: "w", [delivered(last.id, status: 410, .deactivateNow(reason: "Gone"))], now: 30)
            #expect(try await store.scalar("SELECT count(*) FROM webhook_events") == 5)
            #expect(try await store.scalar("SELECT count(*) FROM webhook_checks") == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func eventsAreClaimedRetriedFailedAndListed(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            store.routeWebhooks(Self.routes)
            let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
            let channel = try await store.addChannel(ChannelRow(key: key, channelID: "AAAA", storagePolicy: 1, createdAt: 1),
                                                     audience: nil)
            for id in ["b1", "b2", "b3"] {
                try await store.enqueueBroadcast(NewBroadcast(id: id, channel: channel, payload: Array("{}".utf8),
                                                              priority: 10, expiration: 0), now: 1)
            }
            for b in try await store.claimBroadcasts(worker: "w", limit: 3, leaseMillis: 1_000, now: 2) {
                #expect(try await store.finishBroadcast(worker: "w", BroadcastOutcome(
                    id: b.broadcast.id, delivered: true, status: 200, reason: nil, requestID: "r", uniqueID: nil,
                    attempts: 1), now: 3))
            }
            #expect(try await Self.events(store) == ["http://r1 broadcast.completed broadcast:b1",
                                                     "http://r1 broadcast.completed broadcast:b2",
                                                     "http://r1 broadcast.completed broadcast:b3"])

            let a = try await store.claimWebhookEvents(worker: "a", limit: 10, leaseMillis: 100, now: 10)
            #expect(a.count == 3 && a.allSatisfy { $0.attempts == 0 && $0.eventID.hasPrefix("evt_") })
            #expect(Set(a.map(\.eventID)).count == 3)
            #expect(try await store.claimWebhookEvents(worker: "b", limit: 10, leaseMillis: 100, now: 50).isEmpty, "leased")
            // Three ends in one write; the error text is kept as given, quotes and control characters included.
            let refused = "refused: \"r1\"\n\u{1}\\"
            try await store.finishWebhookEvents(worker: "a", [
                WebhookAttemptEnd(id: a[0].id, .failed(status: 500, error: "HTTP 500", retryAt: 60)),
                WebhookAttemptEnd(id: a[1].id, .delivered(status: 204)),
                WebhookAttemptEnd(id: a[2].id, .failed(status: nil, error: refused, retryAt: nil)),
            ], now: 20)
            // A late finish from a worker that does not hold it changes nothing.
            try await store.finishWebhookEvents(worker: "b", [WebhookAttemptEnd(id: a[1].id,
                                                            .failed(status: nil, error: "x", retryAt: nil))], now: 21)
            #expect(try await store.claimWebhookEvents(worker: "b", limit: 10, leaseMillis: 100, now: 59).isEmpty, "backing off")
            let again = try await store.claimWebhookEvents(worker: "b", limit: 10, leaseMillis: 100, now: 60)
            #expect(again.map(\.eventID) == [a[0].eventID] && again.first?.attempts == 1)

            #expect(try await store.webhookEventCounts() == ["pending": 1, "failed": 1])
            let failed = try await store.webhookEvents(state: "failed", limit: 10, after: nil)
            #expect(failed.map(\.event.eventID) == [a[2].eventID])
            #expect(failed.first?.lastError == refused && failed.first?.finishedAt == 20 && failed.first?.event.attempts == 1)
            #expect(failed.first?.lastStatus == nil)
            let retrying = try await store.webhookEvents(state: "pending", limit: 10, after: nil)
            #expect(retrying.first?.lastStatus == 500 && retrying.first?.lastError == "HTTP 500"
                    && retrying.first?.finishedAt == nil)
            let delivered = try await store.webhookEvents(state: "delivered", limit: 10, after: nil)
            #expect(delivered.map(\.event.eventID) == [a[1].eventID] && delivered.first?.lastStatus == 204)
            let all = try await store.webhookEvents(state: nil, limit: 2, after: nil)
            #expect(all.count == 2)
            #expect(try await store.webhookEvents(state: nil, limit: 2, after: all.last?.cursor).map(\.event.eventID) == [a[2].eventID])

            #expect(try await store.pruneWebhookEvents(finishedBefore: 21, limit: 10) == 2)
            #expect(try await store.scalar("SELECT count(*) FROM webhook_events") == 1)
        }
    }
}
