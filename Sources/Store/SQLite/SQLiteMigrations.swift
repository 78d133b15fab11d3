import GRDB

/// Applies the schema's steps (`Schema`) in their SQLite spelling. The file's
/// `PRAGMA user_version` is the number of steps applied.
///
/// Not GRDB's `DatabaseMigrator`: it reads which migrations are applied before it
/// opens a transaction, so two processes starting at once on a new file would both
/// run step 1 and one would fail on "table already exists". Here the check and the
/// steps are one `BEGIN IMMEDIATE` transaction: the second process waits for the
/// first, then finds nothing to do.
enum Migrations {
    static let steps: [String] = Schema.steps.map(\.sqlite)

    /// Applies the steps up to `last` (all of them but in tests of an upgrade).
    static func apply(_ db: Database, through last: Int = steps.count) throws {
        let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
        guard version <= steps.count else {
            throw StoreError("the database is at schema version \(version), newer than this program's \(steps.count)")
        }
        for (index, step) in steps.prefix(last).enumerated().dropFirst(version) {
            try db.execute(sql: step)
            // user_version lives in the file header, which is part of the transaction.
            try db.execute(sql: "PRAGMA user_version = \(index + 1)")
        }
    }
}

extension SQLiteStore {
    public func migrate() async throws(StoreError) {
        try await migrate(through: Migrations.steps.count)
    }

    /// The schema as of step `last` (tests of an upgrade start from an older one).
    func migrate(through last: Int) async throws(StoreError) {
        try await write("migrate \(path)") { db in try Migrations.apply(db, through: last) }
    }
}
