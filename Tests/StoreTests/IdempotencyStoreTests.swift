import Foundation
import Testing
import TestSupport
@testable import Store

/// Idempotency keys (`IdempotencyKeys`), one body on both stores: one holder per
/// (scope, key) whatever the race, the answer given again, scopes apart, a dead
/// holder's key taken over with the same resource id, expiry and pruning.
@Suite(.postgresCluster) struct IdempotencyStoreTests {
    static let lease: Int64 = 1_000
    static let never: Int64 = 0

    @Test(arguments: StoreKind.allCases) func oneHolderPerKeyAndTheAnswerAgain(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let first = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r1",
                                                            now: 100, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(first == .claimed(resourceID: "r1", resumed: false))
            // Held, no answer yet: busy, whatever the fingerprint (the caller compares).
            let second = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "g", resourceID: "r2",
                                                             now: 200, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(second == .busy(fingerprint: "f"))
            // Another scope (another API key) has its own.
            let other = try await store.claimIdempotencyKey(scope: "t", key: "k", fingerprint: "f", resourceID: "r3",
                                                            now: 200, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(other == .claimed(resourceID: "r3", resumed: false))

            try await store.answerIdempotencyKey(scope: "s", key: "k", resourceID: "r1", status: 202, body: Array("{}".utf8))
            let again = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r4",
                                                            now: 300, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(again == .answered(fingerprint: "f", status: 202, body: Array("{}".utf8)))
            // Long after the lease: an answered key stays answered.
            let later = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r5",
                                                            now: 90_000, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(later == .answered(fingerprint: "f", status: 202, body: Array("{}".utf8)))
            #expect(try await store.scalar("SELECT count(*) FROM idempotency_keys") == 2)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeadHoldersKeyIsTakenOverWithItsResourceID(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            _ = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r1",
                                                    now: 100, leaseMillis: Self.lease, expiredBefore: Self.never)
            // Past the lease, only the same request may take it over, and keeps r1.
            let wrong = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "g", resourceID: "r2",
                                                            now: 5_000, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(wrong == .busy(fingerprint: "f"))
            let taken = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r3",
                                                            now: 5_000, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(taken == .claimed(resourceID: "r1", resumed: true))
            // The new lease holds.
            let busy = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f", resourceID: "r4",
                                                           now: 5_500, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(busy == .busy(fingerprint: "f"))
            // Released (the work failed): the next request runs anew.
            try await store.releaseIdempotencyKey(scope: "s", key: "k", resourceID: "r1")
            let fresh = try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "g", resourceID: "r5",
                                                            now: 5_600, leaseMillis: Self.lease, expiredBefore: Self.never)
            #expect(fresh == .claimed(resourceID: "r5", resumed: false))
        }
    }

    @Test(arguments: StoreKind.allCases) func racingClaimsHaveOneHolder(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 4) { stores in
            let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
                for (i, store) in stores.enumerated() {
                    for j in 0..<5 {
                        group.addTask {
                            try await store.claimIdempotencyKey(scope: "s", key: "k", fingerprint: "f",
                                                                resourceID: "r\(i)-\(j)", now: 100,
                                                                leaseMillis: Self.lease, expiredBefore: Self.never)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let held = claims.filter { if case .claimed = $0 { true } else { false } }
            #expect(held.count == 1, "\(claims)")
            #expect(claims.count - held.count == 19)
        }
    }

    @Test(arguments: StoreKind.allCases) func expiredKeysAreVoidAndPruned(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for (n, at) in [(1, Int64(100)), (2, 200), (3, 10_000)] {
                _ = try await store.claimIdempotencyKey(scope: "s", key: "k\(n)", fingerprint: "f", resourceID: "r\(n)",
                                                        now: at, leaseMillis: Self.lease, expiredBefore: Self.never)
                try await store.answerIdempotencyKey(scope: "s", key: "k\(n)", resourceID: "r\(n)", status: 200, body: [])
            }
            // Past retention (created before `expiredBefore`): a new request with it runs anew.
            let renewed = try await store.claimIdempotencyKey(scope: "s", key: "k1", fingerprint: "g", resourceID: "r9",
                                                              now: 20_000, leaseMillis: Self.lease, expiredBefore: 5_000)
            #expect(renewed == .claimed(resourceID: "r9", resumed: false))
            #expect(try await store.pruneIdempotencyKeys(before: 5_000, limit: 10) == 1, "k2 only: k1 is new again")
            #expect(try await store.pruneIdempotencyKeys(before: 5_000, limit: 10) == 0)
            #expect(try await store.scalar("SELECT count(*) FROM idempotency_keys") == 2)
        }
    }
}
