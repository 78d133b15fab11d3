import Foundation
import GRDB
import PostgresNIO

/// Copies an apns-server SQLite database into a PostgreSQL one, every table of the
/// schema (`CopyPlan`) row for row, so that instances started on PostgreSQL find
/// what the SQLite server had: the same devices, held and pending deliveries (same
/// ids, apns-ids, `not_before`, attempts, outbox rows), holds, results and log.
///
/// - Checks first, writes after: a source that is not an apns-server database at
///   this program's step, or that a server is writing to, an unreachable target, a
///   non-empty one or one at a newer step is a `Refusal` (one line) before anything
///   is written anywhere. The source's write lock is held for the whole copy
///   (`BEGIN IMMEDIATE`, rolled back at the end: nothing is written to it), so that
///   what is copied is one moment of it and no server changes it meanwhile.
/// - The target records which source it is a copy of (`CopyProgress`: its path and
///   a fingerprint of every row): a re-run resumes only from that same source, as
///   it was; one that changed since, or another file, is refused, since a resumed
///   copy would mix the two.
/// - In key order, in batches, each batch one transaction on the target that also
///   records, in `store_copy_progress`, the table's last key copied. A copy killed
///   at any point has committed whole batches with their progress and nothing else,
///   so a second run starts after the last recorded key: no row is copied twice or
///   skipped. The progress table marks the target as this tool's own partial copy,
///   which a re-run resumes instead of refusing as non-empty.
/// - Then each serial column's sequence is set past the largest id copied, so new
///   rows on PostgreSQL take new ids, and each table is counted on both sides.
///   When every count matches, the progress table is dropped: the copy is finished,
///   and a further run would find a non-empty target.
/// - A failure on the way is a `Stopped`: what failed, and what to do next, which
///   is to run it again only where a re-run can get further.
public struct StoreCopy: Sendable {
    /// Bad input, found before anything was written: the command's one line.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// A copy that failed after it began writing (what it committed stays): what
    /// failed, and what to do next.
    public struct Stopped: Error, CustomStringConvertible, Sendable {
        public let reason: String
        /// Run it again (it resumes) where that can get further; otherwise what to do
        /// instead, since a re-run would stop the same way.
        public let next: String
        public var description: String { "\(reason) (\(next))" }

        static let resume = "run it again to resume"
        static let newTarget = "the target's schema is not this program's: copy into a new empty database"
        static let conflict = "the target's own rows conflict with the source's: remove them from the target, or copy into a new empty database"
        static let badValue = "a value in the source cannot be stored in PostgreSQL: correct it in the source, then copy into a new empty database (a changed source does not resume)"
        static let privilege = "give the target's user the rights it lacks, then run it again to resume"

        /// What a failure of a statement on the target leaves to do, by its SQLSTATE.
        static func next(after error: any Error) -> String {
            guard let error = error as? PSQLError, error.code == .server, let state = error.serverInfo?[.sqlState]
            else { return resume }
            switch state {
            case let s where s.hasPrefix("23"): return conflict
            case let s where s.hasPrefix("22"): return badValue
            case "42501": return privilege
            case let s where s.hasPrefix("42"): return newTarget
            default: return resume
            }
        }
    }

    public struct Options: Sendable {
        /// Rows per transaction.
        public var batchSize = 5_000
        /// Copy into a target that has rows of its own: a row with the key of a
        /// copied one is overwritten by it.
        public var intoNonEmpty = false
        /// For tests of a resumed copy: stop (throw `Interrupted`) after this many
        /// committed batches, as a kill would.
        var stopAfterBatches: Int?

        public init(batchSize: Int = 5_000, intoNonEmpty: Bool = false) {
            self.batchSize = max(1, batchSize)
            self.intoNonEmpty = intoNonEmpty
        }
    }

    /// One table's rows on each side at the end.
    public struct Count: Sendable, Equatable {
        public let table: String
        public let source: Int
        public let target: Int
        public var matches: Bool { source == target }
    }

    /// Thrown after `Options.stopAfterBatches` batches.
    struct Interrupted: Error {}

    public let sourcePath: String
    public let target: PostgresStore.Configuration
    public var options: Options
    let plan = CopyPlan.current

    public init(from sourcePath: String, to target: PostgresStore.Configuration, options: Options = Options()) {
        self.sourcePath = sourcePath.hasPrefix("sqlite:") ? String(sourcePath.dropFirst("sqlite:".count)) : sourcePath
        self.target = target
        self.options = options
    }

    /// Copies, calling `progress` with each line to show (`copy: deliveries
    /// 40000/100000`); the counts of every table on both sides. Throws `Refusal` for
    /// bad input (nothing written), `Stopped` for a failure on the way (what was
    /// committed stays).
    public func run(progress: @Sendable (String) -> Void) async throws -> [Count] {
        let source = try openSource()
        defer { Self.release(source) }
        let connection = try await connectTarget()
        do {
            let counts = try await copy(source, connection, progress: progress)
            try? await connection.close()
            return counts
        } catch {
            try? await connection.close()
            switch error {
            case is Refusal, is Stopped, is Interrupted: throw error
            default: throw Stopped(reason: "\(error)", next: Stopped.resume)
            }
        }
    }

    private func copy(_ source: DatabaseQueue, _ target: PostgresConnection,
                      progress: @Sendable (String) -> Void) async throws -> [Count] {
        let resuming = try await checkTarget(target)
        let identity = try identify(source)
        if resuming { try await checkResume(identity, target) }
        try await step("prepare the target", target) { try await PostgresMigrations.apply(target) }
        if resuming {
            progress("copy: resuming the copy recorded on the target")
        } else {
            try await transaction("prepare the target", target) { try await CopyProgress.begin(identity, target) }
        }
        let types = try await step("read the target's columns", target) { try await columnTypes(target) }
        var batches = 0
        for table in plan.tables {
            try await copyTable(table, source, target, types: types, batches: &batches, progress: progress)
        }
        try await step("set the sequences", target) { try await setSequences(target) }
        let counts = try await count(source, target)
        if counts.allSatisfy(\.matches) {
            try await transaction("drop store_copy_progress", target) { try await CopyProgress.end(target) }
        }
        return counts
    }

    // MARK: Checks before writing

    /// The source, if it is an apns-server database at this program's step, with its
    /// write lock held (`BEGIN IMMEDIATE`) until `release`: taken at once or refused,
    /// since a process holding it is a server at work on the file. Every read of
    /// the copy is in this one transaction, so no server commits in between.
    private func openSource() throws(Refusal) -> DatabaseQueue {
        let path = sourcePath
        guard FileManager.default.fileExists(atPath: path) else {
            throw Refusal("the source \(path) does not exist")
        }
        let steps = Schema.steps.count
        do {
            var config = Configuration()
            config.busyMode = .immediateError
            // The transaction spans the whole copy, across many accesses.
            config.allowsUnsafeTransactions = true
            let queue = try DatabaseQueue(path: path, configuration: config)
            do {
                try queue.inDatabase { try $0.execute(sql: "BEGIN IMMEDIATE") }
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY {
                throw Refusal("the source \(path) is in use: another process (an apns-server) is writing to it; stop every apns-server on it, then copy")
            } catch let error as DatabaseError where error.resultCode == .SQLITE_READONLY {
                throw Refusal("the source \(path) cannot be locked for the copy (\(error.message ?? "read-only")): run the copy as a user that may write the file and its folder (nothing is written to it)")
            }
            let (version, tables) = try queue.inDatabase { db in
                (try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0,
                 Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")))
            }
            if version > steps {
                throw Refusal("the source \(path) is at schema step \(version), newer than this program's \(steps): copy it with a newer apns-server")
            }
            if let missing = plan.tables.first(where: { !tables.contains($0.name) }), version == 0 || version == steps {
                throw Refusal("the source \(path) is not an apns-server database (it has no table \(missing.name))")
            }
            if version < steps {
                throw Refusal("the source \(path) is at schema step \(version), older than this program's \(steps): start this apns-server once on it (it upgrades the file), stop it, then copy")
            }
            return queue
        } catch let refusal as Refusal {
            throw refusal
        } catch let error as DatabaseError {
            throw Refusal("the source \(path) is not an apns-server database (\(error.message ?? "\(error.resultCode)"))")
        } catch {
            throw Refusal("the source \(path) cannot be read: \(error)")
        }
    }

    /// Ends the source's transaction (it wrote nothing) and with it the lock.
    private static func release(_ source: DatabaseQueue) {
        try? source.inDatabase { db in if db.isInsideTransaction { try db.execute(sql: "ROLLBACK") } }
    }

    /// The source as the target records it: its path and a fingerprint of every row
    /// the copy reads (`CopyProgress.Identity`), taken under the copy's lock.
    private func identify(_ source: DatabaseQueue) throws(Refusal) -> CopyProgress.Identity {
        let path = URL(fileURLWithPath: sourcePath).standardizedFileURL.path
        do {
            return CopyProgress.Identity(path: path, fingerprint: try source.inDatabase { db in
                try CopyProgress.fingerprint(db, plan)
            })
        } catch {
            throw Refusal("the source \(sourcePath) cannot be read: \((error as? DatabaseError)?.message ?? "\(error)")")
        }
    }

    /// A partial copy resumes only from the source it began with, as it was then.
    private func checkResume(_ identity: CopyProgress.Identity, _ db: PostgresConnection) async throws {
        let recorded = try await step("read store_copy_source", db) { try await CopyProgress.source(db) }
        guard let recorded else {
            throw Refusal("the target \(target) holds a partial copy that does not say which source it is from (an older apns-server made it): finish it with that release, or copy into a new empty database")
        }
        guard recorded.fingerprint == identity.fingerprint else {
            throw Refusal("the target \(target) holds a partial copy of \(recorded.path) as it was then, and the source \(identity.path) is not that (it changed since, or is another database): resuming would mix the two; copy into a new empty database")
        }
    }

    private func connectTarget() async throws(Refusal) -> PostgresConnection {
        do {
            let settings = try target.connection()
            return try await PostgresConnection.connect(configuration: settings, id: 1, logger: PostgresStore.quiet)
        } catch {
            throw Refusal("\(StoreError(postgres: error, "the target", target))")
        }
    }

    /// Whether the target holds this tool's partial copy (to resume). Otherwise it must
    /// be empty, but for the rows a new database has, unless `intoNonEmpty`.
    private func checkTarget(_ db: PostgresConnection) async throws -> Bool {
        let resuming = try await step("read the target", db) {
            try await db.rows("SELECT to_regclass('store_copy_progress') IS NOT NULL")[0].get(0, Bool.self)
        }
        // Whatever the target holds: this program cannot write a schema it does not know.
        let newest = try await step("read the target", db) { () -> Int? in
            guard try await db.rows("SELECT to_regclass('schema_migrations') IS NOT NULL")[0].get(0, Bool.self) else {
                return nil
            }
            return try await db.rows("SELECT max(version) FROM schema_migrations")[0].get(0, Int?.self)
        }
        if let newest, newest > Schema.steps.count {
            throw Refusal("the target \(target) is at schema step \(newest), newer than this program's \(Schema.steps.count): copy with the apns-server release that made it (or a newer one), or into a new empty database")
        }
        if resuming || options.intoNonEmpty { return resuming }
        for table in plan.tables {
            let rows = try await step("read the target", db) { () -> Int in
                let exists = try await db.rows(PostgresQuery(unsafeSQL: "SELECT to_regclass('\(table.name)') IS NOT NULL"))
                guard try exists[0].get(0, Bool.self) else { return 0 }
                return try await db.rows(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(quoted(table.name))"))[0]
                    .get(0, Int.self)
            }
            if rows > table.seededRows {
                throw Refusal("the target \(target) is not empty (table \(table.name) has \(rows) rows): copy into an empty database, or pass --into-non-empty to overwrite rows with the same keys")
            }
        }
        return false
    }

    // MARK: Copying

    private func copyTable(_ table: CopyPlan.Table, _ source: DatabaseQueue, _ target: PostgresConnection,
                           types: [String: [String: String]], batches: inout Int,
                           progress: @Sendable (String) -> Void) async throws {
        guard let columnTypes = types[table.name] else {
            throw Stopped(reason: "copy: the target has no table \(table.name)", next: Stopped.newTarget)
        }
        for column in table.columns where columnTypes[column] == nil {
            throw Stopped(reason: "copy: the target's table \(table.name) has no column \(column)", next: Stopped.newTarget)
        }
        var state = try await step("read store_copy_progress", target) { try await CopyProgress.read(table.name, target) }
        if state.done { return }
        let total = try readSource(source) { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM \(quoted(table.name))") ?? 0
        }
        let booleans = Set(columnTypes.filter { $0.value == "boolean" }.map(\.key))
        while true {
            let last = state.lastKey
            let sql = selectSQL(table, after: last != nil)
            let rows = try readSource(source) { db in
                try Row.fetchAll(db, sql: sql, arguments: StatementArguments(last ?? [])).map { Array($0.databaseValues) }
            }
            guard let lastRow = rows.last else { break }
            let key = table.key.map { lastRow[table.columns.firstIndex(of: $0)!] }
            let json = Self.json(rows, table, booleans: booleans, selfReferencesUpTo: key.first)
            state = CopyProgress.State(lastKey: key, copied: state.copied + rows.count, done: false)
            let saved = state
            try await transaction("copy \(table.name)", target) {
                var binds = PostgresBindings()
                binds.append(json)
                try await target.run(PostgresQuery(unsafeSQL: insertSQL(table), binds: binds))
                try await CopyProgress.save(table.name, saved, target)
            }
            progress("copy: \(table.name) \(state.copied)/\(total)")
            batches += 1
            if let stop = options.stopAfterBatches, batches >= stop { throw Interrupted() }
        }
        try await linkSelfReferences(table, source, target)
        try await transaction("finish \(table.name)", target) {
            try await CopyProgress.save(table.name, CopyProgress.State(lastKey: state.lastKey, copied: state.copied,
                                                                       done: true), target)
        }
    }

    /// A read of the source, within the copy's transaction.
    private func readSource<T>(_ source: DatabaseQueue, _ body: (Database) throws -> T) throws -> T {
        do {
            return try source.inDatabase(body)
        } catch {
            throw Stopped(reason: "copy: the source \(sourcePath) cannot be read: \((error as? DatabaseError)?.message ?? "\(error)")",
                          next: "check it (sqlite3 FILE 'PRAGMA integrity_check'); a repaired file is another source: copy it into a new empty database")
        }
    }

    private func selectSQL(_ table: CopyPlan.Table, after: Bool) -> String {
        let key = table.key.map(quoted).joined(separator: ", ")
        let columns = table.columns.map(quoted).joined(separator: ", ")
        let placeholders = table.key.map { _ in "?" }.joined(separator: ", ")
        return """
            SELECT \(columns) FROM \(quoted(table.name))
            \(after ? "WHERE (\(key)) > (\(placeholders))" : "")
            ORDER BY \(key) LIMIT \(options.batchSize)
            """
    }

    /// One statement for the whole batch: the rows go as one JSON parameter, which
    /// PostgreSQL turns into rows of the table's own type (its columns by name).
    private func insertSQL(_ table: CopyPlan.Table) -> String {
        let columns = table.columns.map(quoted).joined(separator: ", ")
        let others = table.columns.filter { !table.key.contains($0) }
        let onConflict = others.isEmpty ? "DO NOTHING"
            : "DO UPDATE SET " + others.map { "\(quoted($0)) = EXCLUDED.\(quoted($0))" }.joined(separator: ", ")
        return """
            INSERT INTO \(quoted(table.name)) (\(columns))
            SELECT \(columns) FROM json_populate_recordset(NULL::\(quoted(table.name)), $1::json)
            ON CONFLICT (\(table.key.map(quoted).joined(separator: ", "))) \(onConflict)
            """
    }

    /// A row may name a row of its own table copied later (a batched delivery names
    /// its carrier, inserted after it): a foreign key checks at once, so such a
    /// reference goes in as NULL with its batch, and is set here once every row of
    /// the table is in. Setting it again is harmless, so a resumed copy does it whole.
    private func linkSelfReferences(_ table: CopyPlan.Table, _ source: DatabaseQueue,
                                    _ target: PostgresConnection) async throws {
        guard let key = table.key.first, table.key.count == 1 else { return }
        for column in table.selfReferences {
            let rows = try readSource(source) { db in
                try Row.fetchAll(db, sql: """
                    SELECT \(quoted(key)), \(quoted(column)) FROM \(quoted(table.name))
                    WHERE \(quoted(column)) > \(quoted(key)) ORDER BY \(quoted(key))
                    """).map { Array($0.databaseValues) }
            }
            var start = 0
            while start < rows.count {
                let chunk = Array(rows[start..<min(rows.count, start + options.batchSize)])
                start += chunk.count
                let json = Self.json(chunk, names: [key, column], booleans: [], selfReferences: [], upTo: nil)
                try await transaction("link \(table.name).\(column)", target) {
                    var binds = PostgresBindings()
                    binds.append(json)
                    try await target.run(PostgresQuery(unsafeSQL: """
                        UPDATE \(quoted(table.name)) t SET \(quoted(column)) = v.\(quoted(column))
                        FROM json_populate_recordset(NULL::\(quoted(table.name)), $1::json) v
                        WHERE t.\(quoted(key)) = v.\(quoted(key))
                        """, binds: binds))
                }
            }
        }
    }

    /// Every serial column's next value past the largest id copied.
    private func setSequences(_ db: PostgresConnection) async throws {
        for table in plan.tables {
            for column in table.key {
                let sequence = try await db.rows(PostgresQuery(
                    unsafeSQL: "SELECT pg_get_serial_sequence('\(table.name)', '\(column)')"))[0].get(0, String?.self)
                guard let sequence else { continue }
                try await db.run(PostgresQuery(unsafeSQL: """
                    SELECT setval('\(sequence)', coalesce((SELECT max(\(quoted(column))) FROM \(quoted(table.name))), 0) + 1, false)
                    """))
            }
        }
    }

    private func count(_ source: DatabaseQueue, _ target: PostgresConnection) async throws -> [Count] {
        var counts: [Count] = []
        for table in plan.tables {
            let mine = try readSource(source) { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM \(quoted(table.name))") ?? 0
            }
            let theirs = try await step("count \(table.name)", target) {
                try await target.rows(PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(quoted(table.name))"))[0]
                    .get(0, Int.self)
            }
            counts.append(Count(table: table.name, source: mine, target: theirs))
        }
        return counts
    }

    /// Each table's columns on the target and their types (`boolean` matters: SQLite
    /// keeps booleans as 0/1).
    private func columnTypes(_ db: PostgresConnection) async throws -> [String: [String: String]] {
        var types: [String: [String: String]] = [:]
        for row in try await db.rows("""
            SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns
            WHERE table_schema = current_schema()
            """) {
            types[try row.get(0, String.self), default: [:]][try row.get(1, String.self)] = try row.get(2, String.self)
        }
        return types
    }

    // MARK: Rows as JSON

    static func json(_ rows: [[DatabaseValue]], _ table: CopyPlan.Table, booleans: Set<String>,
                     selfReferencesUpTo last: DatabaseValue?) -> String {
        let upTo: Int64? = if case .int64(let id) = last?.storage { id } else { nil }
        return json(rows, names: table.columns, booleans: booleans, selfReferences: Set(table.selfReferences), upTo: upTo)
    }

    /// `[{"column": value, …}, …]`: booleans as true/false, blobs as bytea's hex
    /// text, and a self-reference past `upTo` (not copied yet) as null.
    static func json(_ rows: [[DatabaseValue]], names: [String], booleans: Set<String>, selfReferences: Set<String>,
                     upTo: Int64?) -> String {
        var out = "["
        out.reserveCapacity(rows.count * 256)
        for (r, row) in rows.enumerated() {
            if r > 0 { out += "," }
            out += "{"
            for (i, name) in names.enumerated() {
                if i > 0 { out += "," }
                out += "\"\(name)\":"
                switch row[i].storage {
                case .null:
                    out += "null"
                case .int64(let n):
                    if booleans.contains(name) {
                        out += n != 0 ? "true" : "false"
                    } else if selfReferences.contains(name), let upTo, n > upTo {
                        out += "null"
                    } else {
                        out += String(n)
                    }
                case .double(let d):
                    out += String(d)
                case .string(let s):
                    JSONText.append(s, to: &out)
                case .blob(let data):
                    out += "\"\\\\x"
                    var hex = [UInt8]()
                    hex.reserveCapacity(data.count * 2)
                    for byte in data {
                        hex.append(hexDigits[Int(byte >> 4)])
                        hex.append(hexDigits[Int(byte & 0x0f)])
                    }
                    out += String(decoding: hex, as: UTF8.self)
                    out += "\""
                }
            }
            out += "}"
        }
        out += "]"
        return out
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    // MARK: Errors as one line

    private func step<T>(_ doing: String, _ db: PostgresConnection, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as Refusal {
            throw error
        } catch let error as Stopped {
            throw error
        } catch {
            throw Stopped(reason: StoreError(postgres: error, "copy: \(doing)", target).description,
                          next: Stopped.next(after: error))
        }
    }

    private func transaction(_ doing: String, _ db: PostgresConnection, _ body: () async throws -> Void) async throws {
        try await step(doing, db) {
            try await db.run("BEGIN")
            do {
                try await body()
                try await db.run("COMMIT")
            } catch {
                try? await db.run("ROLLBACK")
                throw error
            }
        }
    }
}

/// `"name"`: every identifier the copy writes into SQL is the schema's own.
func quoted(_ identifier: String) -> String { "\"\(identifier)\"" }
