import Foundation
import GRDB

// Internal doors for tests (`@testable import Store`): look at and disturb the file
// in ways the protocol does not offer, without the tests importing GRDB.

extension SQLiteStore {
    /// The first column of the first row, as an integer (nil when NULL or no row).
    func scalar(_ sql: String) async throws(StoreError) -> Int64? {
        try await read("inspect") { db in try Int64.fetchOne(db, sql: sql) }
    }

    /// The rows of one statement, each column as text (NULL as nil).
    func texts(_ sql: String) async throws(StoreError) -> [[String?]] {
        try await read("inspect") { db in
            try Row.fetchAll(db, sql: sql).map { row in (0..<row.count).map { row[$0] as String? } }
        }
    }

    /// The same, on the writer connection (the one whose settings decide durability).
    func writerScalar(_ sql: String) async throws(StoreError) -> Int64? {
        try await write("inspect") { db in try Int64.fetchOne(db, sql: sql) }
    }

    /// EXPLAIN QUERY PLAN's details for `sql`, one a step.
    func queryPlan(_ sql: String, arguments: StatementArguments = []) async throws(StoreError) -> [String] {
        try await read("explain") { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
        }
    }

    /// Runs statements in one write transaction.
    func execute(_ sql: String) async throws(StoreError) {
        try await write("execute") { db in try db.execute(sql: sql) }
    }

    /// `execute`, waiting on this thread: for a test's synchronous callback.
    func executeWaiting(_ sql: String) throws(StoreError) {
        do { try pool.write { try $0.execute(sql: sql) } } catch { throw StoreError(error, "execute") }
    }

    /// A copy of the database in one new file (`VACUUM INTO`), outside any transaction.
    func vacuum(into path: String) async throws(StoreError) {
        do {
            try await pool.writeWithoutTransaction { try $0.execute(sql: "VACUUM INTO ?", arguments: [path]) }
        } catch {
            throw StoreError(error, "vacuum into \(path)")
        }
    }

    /// Holds the write lock until `released()` says so (at most a minute), calling
    /// `held()` once it has it: a test decides when the lock goes, not a timer a
    /// starved machine can outlast.
    func holdWriteLock(held: @escaping @Sendable () -> Void,
                       until released: @escaping @Sendable () -> Bool) async throws(StoreError) {
        try await write("hold the write lock") { _ in
            held()
            for _ in 0..<60_000 where !released() { usleep(1_000) }
        }
    }
}
