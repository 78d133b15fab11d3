import Foundation
import GRDB

/// The SQLite driver: a GRDB connection inside one of its transactions.
///
/// SQLite's calls return at once (a lock is waited for inside SQLite, on the busy
/// timeout), so the policy, written `async` for PostgreSQL's sake, never suspends
/// here: `runToEnd` runs it to its end on GRDB's writer or reader thread, inside
/// GRDB's own transaction.
struct SQLiteTransaction: StoreConnection {
    let db: Database
    var engine: Engine { .sqlite }

    func rows(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws -> [Row] {
        try Row.fetchAll(db.cachedStatement(sql: statement.sqlite), arguments: Self.bind(arguments))
    }

    func forEachRow(_ statement: Spelling, _ arguments: [any StoreBindable],
                    _ body: (Row) throws -> Void) async throws {
        let rows = try Row.fetchCursor(db.cachedStatement(sql: statement.sqlite), arguments: Self.bind(arguments))
        while let row = try rows.next() { try body(row) }
    }

    func run(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws {
        try db.cachedStatement(sql: statement.sqlite).execute(arguments: Self.bind(arguments))
    }

    func wakeWorkers() async throws {}

    /// Each argument as GRDB binds it: booleans as 0/1, lists as one JSON text.
    /// Built as `DatabaseValueConvertible` existentials, as an array literal of
    /// arguments is: GRDB's initializer from a sequence of `DatabaseValue`s maps it
    /// through a key path, a runtime look-up per value.
    static func bind(_ arguments: [any StoreBindable]) -> StatementArguments {
        StatementArguments(arguments.map { argument -> (any DatabaseValueConvertible)? in
            switch argument.storeValue {
            case .int(let n): n
            case .text(let s): s
            case .bytes(let b): b.map { Data($0) }
            case .bool(let b): b.map { $0 ? 1 : 0 }
            case .ints(let list): jsonArray(list)
            case .texts(let list): jsonArray(list)
            }
        })
    }
}

extension SQLiteStore: StoreEngine {
    func writing<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (SQLiteTransaction) async throws -> T) async throws(StoreError) -> T {
        try await write(doing) { db in
            nonisolated(unsafe) let transaction = SQLiteTransaction(db: db)
            return try runToEnd { try await body(transaction) }
        }
    }

    func reading<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (SQLiteTransaction) async throws -> T) async throws(StoreError) -> T {
        try await read(doing) { db in
            nonisolated(unsafe) let transaction = SQLiteTransaction(db: db)
            return try runToEnd { try await body(transaction) }
        }
    }
}

/// Runs `body` on this thread to its end and returns its value. It may only await
/// calls that never suspend (a `SQLiteTransaction`'s): a task started immediately runs
/// on the caller's thread until its first suspension, and without one it has ended
/// when `Task.immediate` returns. One that did suspend would run a statement off
/// GRDB's thread, outside its transaction: it stops here instead.
func runToEnd<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Outcome<T>()
    Task.immediate {
        do { outcome.result = .success(try await body()) } catch { outcome.result = .failure(error) }
    }
    guard let result = outcome.result else {
        preconditionFailure("a SQLite transaction's body suspended: it awaited something other than its statements")
    }
    return try result.get()
}

/// Written once by the task, read after it by its starter on the same thread.
private final class Outcome<T: Sendable>: @unchecked Sendable {
    var result: Result<T, any Error>?
}
