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
        let cluster = try await PostgresCluster.make()
        do {
            try await PostgresClusterTrait.$current.withValue(cluster) { try await function() }
        } catch {
            await cluster.stopOffPool()
            throw error
        }
        await cluster.stopOffPool()
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
    let store = try PostgresStore(url: try await suiteCluster().newDatabase())
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
    let url = try await suiteCluster().newDatabase()
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
