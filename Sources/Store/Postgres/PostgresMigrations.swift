import PostgresNIO

/// Applies the schema's steps (`Schema`) in their PostgreSQL spelling.
/// `schema_migrations` lists the steps applied, by number and name.
///
/// Each step is one transaction that first takes a transaction-level advisory lock:
/// instances starting at once on an empty database queue there, and each, once it
/// has the lock, reads which steps are applied and finds nothing left to do.
enum PostgresMigrations {
    /// Any constant shared by every instance of this program; "apns" in ASCII.
    static let lockKey: Int64 = 0x6170_6e73

    static var steps: [SchemaStep] { Schema.steps }

    /// Applies the steps up to `last` (all of them but in tests of an upgrade).
    static func apply(_ db: PostgresConnection, through last: Int = Schema.steps.count) async throws {
        while true {
            let done = try await step(db, through: last)
            if done { return }
        }
    }

    /// Applies the next missing step, if any; true when there was none.
    private static func step(_ db: PostgresConnection, through last: Int) async throws -> Bool {
        try await db.run("BEGIN")
        do {
            try await db.run("SELECT pg_advisory_xact_lock(\(lockKey))")
            try await renumber(db)
            let applied = Set(try await db.rows("SELECT version FROM schema_migrations").map { try $0.get(0, Int.self) })
            let newest = applied.max() ?? 0
            guard newest <= steps.count else {
                throw StoreError("the database is at schema version \(newest), newer than this program's \(steps.count)")
            }
            // In order; a database renumbered from before the one history may miss
            // steps below its newest (see `Schema.postgresNumberingBefore12`).
            guard let next = steps.prefix(last).first(where: { !applied.contains($0.number) }) else {
                try await db.run("COMMIT")
                return true
            }
            for statement in next.postgres { try await db.run(PostgresQuery(unsafeSQL: statement)) }
            try await db.run("INSERT INTO schema_migrations (version, name) VALUES (\(next.number), \(next.name))")
            try await db.run("COMMIT")
            return false
        } catch {
            _ = try? await db.run("ROLLBACK")
            throw error
        }
    }

    /// Makes `schema_migrations` the one history's list: created on an empty
    /// database; on one from before, whose rows numbered PostgreSQL's own steps
    /// (and which has no `name` column), those rows become the steps here it has.
    private static func renumber(_ db: PostgresConnection) async throws {
        let columns = try await db.rows("""
            SELECT count(*) FILTER (WHERE column_name = 'name'), count(*) FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = 'schema_migrations'
            """)[0]
        let (named, any) = (try columns.get(0, Int.self), try columns.get(1, Int.self))
        if any == 0 {
            try await db.run("""
                CREATE TABLE schema_migrations (
                    version    INTEGER PRIMARY KEY,
                    name       TEXT NOT NULL,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """)
            return
        }
        guard named == 0 else { return }
        let old = try await db.rows("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].get(0, Int.self)
        guard old == 0 || Schema.postgresNumberingBefore12[old] != nil else {
            throw StoreError("the database is at schema version \(old), newer than this program's \(steps.count)")
        }
        try await db.run("DELETE FROM schema_migrations")
        try await db.run("ALTER TABLE schema_migrations ADD COLUMN name TEXT NOT NULL")
        for number in Schema.postgresNumberingBefore12[old] ?? [] {
            try await db.run("""
                INSERT INTO schema_migrations (version, name) VALUES (\(number), \(steps[number - 1].name))
                """)
        }
    }

}

extension PostgresStore {
    /// On a connection of its own, so that a wrong URL, a refused password or a
    /// server that is down is one line at start-up, not a minute of pool retries.
    public func migrate() async throws(StoreError) {
        try await migrate(through: Schema.steps.count)
    }

    /// The schema as of step `last` (tests of an upgrade start from an older one).
    func migrate(through last: Int) async throws(StoreError) {
        let settings = try configuration.connection()
        do {
            let connection = try await PostgresConnection.connect(configuration: settings, id: 0, logger: Self.quiet)
            do {
                try await PostgresMigrations.apply(connection, through: last)
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        } catch {
            throw StoreError(postgres: error, "migrate", configuration)
        }
    }
}
