import Foundation
import Testing
@testable import Store
import TestSupport

/// One PostgreSQL cluster for a suite: started before its first test, stopped (and
/// its folder deleted) after its last, whatever happened in between. Each test makes
/// its own database on it (`withPostgres`), so tests run side by side.
struct PostgresClusterTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        try await PostgresClusterTrait.$current.withValue(cluster) { try await function() }
    }

    @TaskLocal static var current: PostgresCluster?
}

extension Trait where Self == PostgresClusterTrait {
    /// `@Suite(.postgresCluster)`.
    static var postgresCluster: Self { Self() }
}

/// The suite's cluster.
func suiteCluster() throws -> PostgresCluster {
    try #require(PostgresClusterTrait.current, "the suite needs the .postgresCluster trait")
}

/// A migrated store on a new database of the suite's cluster, closed after `body`.
func withPostgres<T>(_ body: (PostgresStore) async throws -> T) async throws -> T {
    let store = try PostgresStore(url: try suiteCluster().createDatabase())
    do {
        try await store.migrate()
        let result = try await body(store)
        await store.close()
        return result
    } catch {
        await store.close()
        throw error
    }
}

/// Several stores (instances) on one new database, closed after `body`; the first
/// has migrated it.
func withPostgres<T>(instances: Int, _ body: ([PostgresStore]) async throws -> T) async throws -> T {
    let url = try suiteCluster().createDatabase()
    let stores = try (0..<instances).map { _ in try PostgresStore(url: url) }
    do {
        try await stores[0].migrate()
        let result = try await body(stores)
        for store in stores { await store.close() }
        return result
    } catch {
        for store in stores { await store.close() }
        throw error
    }
}

// The SQLite fixtures' helpers (Fixtures.swift), for a PostgresStore.

/// Registers `user`'s token `n` and returns its device id.
@discardableResult
func register(_ store: PostgresStore, _ user: String, _ n: Int, app: String = "staff", platform: String = "ios",
              company: String? = nil, now: Int64 = 1) async throws -> Int64 {
    try await store.register(registration(user, n, app: app, platform: platform, company: company), now: now)
    return try #require(try await store.scalar(
        "SELECT id FROM devices WHERE app_type = '\(app)' AND token = '\(token(n))'"))
}

/// Enqueues one notification `id` with one delivery per (user, device id) pair.
@discardableResult
func enqueue(_ store: PostgresStore, _ id: String, _ targets: [(user: String, device: Int64)],
             now: Int64 = 1) async throws -> [NewDelivery] {
    let deliveries = targets.enumerated().map { i, target in
        NewDelivery(userID: target.user, deviceID: target.device, token: token(Int(target.device)),
                    environment: "production", apnsID: "\(id)-\(i)",
                    payload: Array(#"{"aps":{"alert":"\#(id) \#(i)"}}"#.utf8))
    }
    try await store.enqueue(NewNotification(id: id, type: "order_created", entityType: "order", entityID: "o-\(id)",
                                            appType: "staff"), deliveries, now: now)
    return deliveries
}

/// `count` deliveries of one notification, to made-up devices (the outbox does not check them).
func enqueueMany(_ store: PostgresStore, _ id: String, count: Int, now: Int64 = 1) async throws {
    try await enqueue(store, id, (0..<count).map { (user: "u\($0 % 50)", device: Int64($0)) }, now: now)
}
