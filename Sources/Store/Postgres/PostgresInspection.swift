import PostgresNIO

// Internal doors for tests (`@testable import Store`): look at and disturb the
// database in ways the protocol does not offer, without the tests importing PostgresNIO.

extension PostgresStore {
    /// The first column of the first row, as an integer (nil when NULL or no row).
    func scalar(_ sql: String) async throws(StoreError) -> Int64? {
        let found = try await rows("inspect", PostgresQuery(unsafeSQL: sql))
        do {
            return try found.first?.get(0, Int64?.self)
        } catch {
            throw StoreError(postgres: error, "inspect", configuration)
        }
    }

    /// Runs one statement on its own.
    func execute(_ sql: String) async throws(StoreError) {
        _ = try await rows("execute", PostgresQuery(unsafeSQL: sql))
    }

    /// The rows of one statement, each column as text (NULL as nil): for EXPLAIN.
    func texts(_ sql: String) async throws(StoreError) -> [[String?]] {
        let found = try await rows("inspect", PostgresQuery(unsafeSQL: sql))
        do {
            return try found.map { row in try (0..<row.count).map { try row.get($0, String?.self) } }
        } catch {
            throw StoreError(postgres: error, "inspect", configuration)
        }
    }
}
