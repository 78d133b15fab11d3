import Foundation
import Testing
@testable import Store
import TestSupport

/// The PostgreSQL cluster a suite's tests make their databases on: the test
/// process's one (`PostgresCluster.shared()`), started by the first suite that needs
/// it and stopped when the process ends. Each test makes its own database on it
/// (`withPostgres`), so tests run side by side.
struct PostgresClusterTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try await PostgresCluster.shared()
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

/// A new database on the suite's cluster, at the current schema: a copy of a
/// template migrated once for the whole run.
func newMigratedDatabase() async throws -> String {
    try await suiteCluster().newDatabase(template: "migrated") { url in
        let store = try PostgresStore(url: url)
        try await store.migrate()
        await store.close()
    }
}

/// A migrated store on a new database of the suite's cluster, closed after `body`.
func withPostgres<T>(_ body: (PostgresStore) async throws -> T) async throws -> T {
    let store = try PostgresStore(url: try await newMigratedDatabase())
    do {
        let result = try await body(store)
        await store.close()
        return result
    } catch {
        await store.close()
        throw error
    }
}

/// Several stores (instances) on one new migrated database, closed after `body`.
func withPostgres<T>(instances: Int, _ body: ([PostgresStore]) async throws -> T) async throws -> T {
    try await withPostgres(url: try await newMigratedDatabase(), instances: instances, body)
}

/// Several stores (instances) on the database at `url`, closed after `body`, whatever it does.
func withPostgres<T>(url: String, instances: Int, _ body: ([PostgresStore]) async throws -> T) async throws -> T {
    let stores = try (0..<instances).map { _ in try PostgresStore(url: url) }
    do {
        let result = try await body(stores)
        for store in stores { await store.close() }
        return result
    } catch {
        for store in stores { await store.close() }
        throw error
    }
}
