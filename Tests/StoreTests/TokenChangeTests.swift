import Foundation
import Testing
import TestSupport
@testable import Store

/// What an APNs answer does to a token, applied by `finish`. Each behaviour runs on
/// both stores.
@Suite(.postgresCluster) struct TokenChangeTests {
    /// Claims every pending delivery for "w" (there is at least one) and finishes each
    /// with the outcome `decide` gives.
    func finishAll(_ store: some TestStore, now: Int64,
                   _ decide: (ClaimedDelivery) -> DeliveryOutcome) async throws {
        let claimed = try await store.claim(worker: "w", limit: 100, leaseMillis: 1_000, now: now)
        #expect(!claimed.isEmpty)
        #expect(try await store.finish(worker: "w", claimed.map(decide), now: now) == 0)
    }

    @Test(arguments: StoreKind.allCases)
    func a410DeactivatesOnlyATokenRegisteredBeforeItsTimestamp(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let stale = try await register(store, "u1", 1, now: 100)
            let reinstalled = try await register(store, "u1", 2, now: 100)
            try await register(store, "u1", 2, now: 300)  // the app came back after APNs saw the token die
            try await enqueue(store, "n", [("u1", stale), ("u1", reinstalled)], now: 400)

            try await finishAll(store, now: 500) { claimed in
                delivered(claimed.id, status: 410, at: 200, .deactivate(reason: "Unregistered", registeredBefore: 200))
            }
            #expect(try await store.devices(userID: "u1").map(\.id) == [reinstalled])
            #expect(try await store.scalar("""
                SELECT count(*) FROM devices WHERE id = \(stale) AND deactivated_reason = 'Unregistered' AND deactivated_at = 500
                """) == 1)
            // A 410 at exactly the registration time does not kill it either (registered *before*).
            try await enqueue(store, "m", [("u1", reinstalled)], now: 600)
            try await finishAll(store, now: 700) { claimed in
                delivered(claimed.id, status: 410, at: 300, .deactivate(reason: "Unregistered", registeredBefore: 300))
            }
            #expect(try await store.devices(userID: "u1").map(\.id) == [reinstalled])
        }
    }

    /// One batch with both changes: the one token goes whatever its registration
    /// time, the other moves to the sandbox and is marked used.
    @Test(arguments: StoreKind.allCases)
    func deactivateNowIgnoresTheRegistrationTimeAndMoveEnvironmentMovesTheToken(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let device = try await register(store, "u1", 1, now: 1_000)
            let other = try await register(store, "u1", 2, now: 1_000)
            try await enqueue(store, "n", [("u1", device), ("u1", other)], now: 1_000)
            try await finishAll(store, now: 1_001) { claimed in
                claimed.delivery.deviceID == device
                    ? DeliveryOutcome(deliveryID: claimed.id, delivered: false, status: 400, reason: "DeviceTokenNotForTopic",
                                      timestamp: 1_001, attempts: 1,
                                      tokenChange: .deactivateNow(reason: "DeviceTokenNotForTopic"))
                    : delivered(claimed.id, .moveEnvironment("sandbox"))
            }
            #expect(try await store.devices(userID: "u1").map(\.id) == [other])
            #expect(try await store.scalar("SELECT count(*) FROM devices WHERE deactivated_reason = 'DeviceTokenNotForTopic'") == 1)
            let recipients = try await store.recipients(appType: "staff", audience: .users(["u1"]))
            #expect(recipients.first?.devices == [.init(id: other, token: token(2), environment: "sandbox")])
            #expect(try await store.devices(userID: "u1").first?.lastUsedAt == 1_001)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func moveEnvironmentChangesWhereTheTokenIsSentNext(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let device = try await register(store, "u1", 1)
            try await enqueue(store, "n", [("u1", device)])
            try await finishAll(store, now: 10) { claimed in delivered(claimed.id, .moveEnvironment("sandbox")) }
            let recipients = try await store.recipients(appType: "staff", audience: .users(["u1"]))
            #expect(recipients.first?.devices == [.init(id: device, token: token(1), environment: "sandbox")])
            #expect(try await store.devices(userID: "u1").first?.lastUsedAt == 10)
        }
    }
}
