import Foundation
import GRDB
import GRDBSQLite
#if canImport(Glibc)
import Glibc
#endif

/// The store on one SQLite file: one apns-server process (or a few on one machine).
///
/// A GRDB `DatabasePool` gives one writer connection and several readers in WAL
/// mode, so reads (registry look-ups, the log) never wait for the worker's writes.
/// Every write is a `BEGIN IMMEDIATE` transaction (GRDB's default for writes): the
/// write lock is taken up front, so two processes on one file queue on the busy
/// timeout instead of both reading the same outbox rows and claiming them twice.
///
/// The store's policy is written once for both engines (`StoreEngine`, one file per
/// concern in `Sources/Store`); this folder is SQLite's driver: the pool and its
/// transactions (`SQLiteTransaction`), the bulk writes of a fan-out, the claim and
/// the finish (`SQLiteOutbox.swift`), and the schema's steps (`SQLiteMigrations.swift`).
public final class SQLiteStore: DeliveryStore {
    /// What a committed transaction survives.
    public enum Durability: Sendable {
        /// `synchronous=NORMAL` in WAL mode: a commit is in the WAL (the OS has it)
        /// before the call returns, so a kill -9 of the process loses nothing
        /// committed. Only an OS crash or power loss can roll back the last
        /// commits (never corrupt the file). No fsync per commit.
        case processCrash
        /// `synchronous=FULL`: the WAL is fsynced at every commit, so committed work
        /// survives power loss too, at one fsync per transaction.
        case powerLoss
    }

    /// The database file.
    public let path: String
    let pool: DatabasePool
    private let checkpointer: Checkpointer
    /// Which receivers want which webhook events (see `WebhookEvents.swift`).
    let webhookRouting = WebhookRouting()

    /// Opens (creating it and its folder if missing) the database at `path`. A
    /// leading `sqlite:` (as in the service's `--store sqlite:var/apns.db`) is
    /// dropped. The schema is not touched until `migrate()`.
    ///
    /// - Parameter busyTimeout: how long a write waits for another process's
    ///   write lock before it fails with "database is locked".
    public init(path: String, durability: Durability = .processCrash,
                busyTimeout: Duration = .seconds(5)) throws(StoreError) {
        let path = Self.filePath(path)
        self.path = path
        try Self.prepareFile(path)

        var config = Configuration()
        config.label = "apns-store"
        // The writer's cache holds what its next transactions touch again: a fan-out's
        // rows and index entries go in at the right edge of each b-tree (ids and
        // apns-ids increase), and its hand-over and finishes come back to those same
        // recent pages soon after. That tail, not the whole fan-out, is the working
        // set: a larger cache measured no less CPU, only a larger process, as pages
        // are allocated as used and kept. Sorts and temp b-trees stay in memory.
        // Readers (several in a pool) make short reads, a page of a fan-out's
        // audience or of the log at a time, which the OS's file cache serves again:
        // a small cache each, or a pool's readers alone could hold hundreds of MB.
        config.prepareDatabase { db in
            try db.execute(sql: """
                PRAGMA cache_size = \(db.configuration.readonly ? -8192 : -16384); PRAGMA temp_store = MEMORY;
                PRAGMA wal_autocheckpoint = \(Checkpointer.writerPages)
                """)
        }
        config.busyMode = .timeout(TimeInterval(busyTimeout.components.seconds)
            + TimeInterval(busyTimeout.components.attoseconds) / 1e18)
        do {
            pool = try Self.openPool(path, config, waitingUpTo: busyTimeout)
            // GRDB's pool sets WAL and synchronous=NORMAL on its writer; FULL is
            // per connection, and the writer is the only connection that commits.
            if durability == .powerLoss {
                try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            }
            checkpointer = try Checkpointer(path: path)
        } catch {
            throw StoreError(error, "cannot open \(path)")
        }
    }

    /// Turning WAL on needs the file to itself, and SQLite answers "database is locked"
    /// there at once instead of through the busy handler: two processes starting on a
    /// new file at the same moment would see one of them fail. It is tried again for
    /// as long as a write would wait.
    private static func openPool(_ path: String, _ config: Configuration,
                                 waitingUpTo timeout: Duration) throws -> DatabasePool {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                return try DatabasePool(path: path, configuration: config)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && ContinuousClock.now < deadline {
                usleep(10_000)
            }
        }
    }

    /// `sqlite:var/apns.db` and `sqlite://var/apns.db` name the file `var/apns.db`.
    static func filePath(_ location: String) -> String {
        for scheme in ["sqlite://", "sqlite:"] where location.hasPrefix(scheme) {
            return String(location.dropFirst(scheme.count))
        }
        return location
    }

    /// Creates the folder, and opens the file once ourselves: SQLite only says
    /// "unable to open database file", while errno says why (permission denied,
    /// is a directory, not a directory…), which is the line an operator needs.
    ///
    /// The file holds device tokens and payloads: it is made owner-only (0600), and
    /// so is one an older version made readable to others, with its -wal and -shm
    /// (SQLite creates those with the database file's mode).
    static func prepareFile(_ path: String) throws(StoreError) {
        guard !path.isEmpty else { throw StoreError("cannot open the database: the path is empty") }
        try makeFolders(URL(fileURLWithPath: path).deletingLastPathComponent().path, for: path)
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError("cannot open \(path): \(errnoLine())") }
        closeFile(fd)
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            guard stat(file, &info) == 0, info.st_mode & 0o077 != 0 else { continue }
            // Fails only on a file another user owns: its owner chose its mode.
            _ = chmod(file, info.st_mode & 0o700)
        }
    }

    /// `mkdir -p`, with errno's reason when a level cannot be made.
    static func makeFolders(_ folder: String, for path: String) throws(StoreError) {
        var prefix = folder.hasPrefix("/") ? "" : "."
        for part in folder.split(separator: "/") {
            prefix += "/" + part
            if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
                throw StoreError("cannot open \(path): cannot create folder \(prefix): \(errnoLine())")
            }
        }
    }

    // MARK: Transactions, with errors as one line

    /// One `BEGIN IMMEDIATE` transaction on the writer; `doing` names it in errors.
    func write<T: Sendable>(_ doing: String,
                            _ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do { return try await pool.write(body) } catch { throw StoreError(error, doing) }
    }

    /// One read transaction on a reader (a snapshot; never waits for the writer).
    func read<T: Sendable>(_ doing: String,
                           _ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do { return try await pool.read(body) } catch { throw StoreError(error, doing) }
    }
}

extension StoreError {
    /// "claim: database is locked", "cannot open var/apns.db: file is not a database".
    init(_ error: any Error, _ doing: String) {
        switch error {
        case let error as StoreError:
            self = error
        case let error as DatabaseError:
            // BUSY: another connection (another process) holds the write lock past the
            // busy timeout; LOCKED: a conflict inside this process. Both pass.
            let busy = error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
            self.init("\(doing): \(error.message ?? "\(error.resultCode)")", temporary: busy)
        default:
            self.init("\(doing): \(error)")
        }
    }
}

/// "permission denied", in the lower case of a line that continues a sentence.
func errnoLine() -> String {
    let text = String(cString: strerror(errno))
    return text.prefix(1).lowercased() + text.dropFirst()
}

/// An id list bound as one JSON parameter (`IN (SELECT value FROM json_each(?))`),
/// so a statement's text does not change with the list's length and stays cached.
func jsonArray<T: Encodable>(_ values: [T]) -> String {
    String(decoding: try! JSONEncoder().encode(values), as: UTF8.self)
}

/// The same for integers, without Foundation's encoder (ids by the thousand): the
/// digits written straight into one buffer, as a String per id costs more than
/// SQLite's parse of it.
func jsonArray(_ values: [Int64]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity(values.count * 8 + 2)
    out.append(UInt8(ascii: "["))
    for (i, v) in values.enumerated() {
        if i > 0 { out.append(UInt8(ascii: ",")) }
        if v < 0 { out.append(UInt8(ascii: "-")) }
        var rest = v.magnitude
        let start = out.count
        repeat {
            out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10))
            rest /= 10
        } while rest > 0
        var (low, high) = (start, out.count - 1)
        while low < high {
            out.swapAt(low, high)
            (low, high) = (low + 1, high - 1)
        }
    }
    out.append(UInt8(ascii: "]"))
    return String(decoding: out, as: UTF8.self)
}

extension Database {
    /// Runs `sql(rows)` (a statement whose text holds `rows` row placeholders) over
    /// `count` rows in chunks of powers of two up to `maxRows`, so that at most a
    /// dozen statement texts are ever prepared and they stay in GRDB's cache.
    /// `bind(i, &arguments)` appends row `i`'s values; `finalArguments` are bound
    /// after the rows' (placeholders that follow the rows in the text). `each` gets
    /// every row a RETURNING clause gives, as its first two integer columns.
    /// Returns the rows the statements inserted, updated or deleted.
    @discardableResult
    func executeChunked(count: Int, maxRows: Int, sql: (Int) -> String,
                        bind: (Int, inout [DatabaseValue]) -> Void,
                        finalArguments: [DatabaseValue] = [],
                        rows each: ((Int64, Int64) -> Void)? = nil) throws -> Int {
        var start = 0
        var changed = 0
        var values: [DatabaseValue] = []
        while start < count {
            var size = maxRows
            while size > count - start { size /= 2 }
            values.removeAll(keepingCapacity: true)
            for i in start..<(start + size) { bind(i, &values) }
            values.append(contentsOf: finalArguments)
            try executeBound(try cachedStatement(sql: sql(size)), values, each: each)
            changed += changesCount
            start += size
        }
        return changed
    }

    /// Binds straight through SQLite's C API and steps to the end: building GRDB's
    /// `StatementArguments` for 256 rows × 14 columns (a key-path map over generic
    /// values) was a tenth of a 100k fan-out's enqueue, and with its generic
    /// metadata look-ups a tenth of the finishes' CPU too.
    ///
    /// Texts are copied once into one buffer and bound `SQLITE_STATIC`: bound
    /// `SQLITE_TRANSIENT`, SQLite made a copy of its own of each (a malloc and a free
    /// per text, five a delivery), and the allocator's free-list work was a tenth of
    /// the enqueue's writer. The buffer outlives the statement's use of it: the
    /// statement is stepped to its end and reset, bindings cleared, inside.
    private func executeBound(_ statement: Statement, _ values: [DatabaseValue],
                              each: ((Int64, Int64) -> Void)?) throws {
        var texts: [UInt8] = []
        var spans: [(start: Int, count: Int)] = []
        for value in values {
            guard case .string(var s) = value.storage else { continue }
            let start = texts.count
            s.withUTF8 { texts.append(contentsOf: $0) }
            spans.append((start, texts.count - start))
        }
        try texts.withUnsafeBufferPointer { arena in
            let raw = statement.sqliteStatement
            sqlite3_reset(raw)
            sqlite3_clear_bindings(raw)
            defer {
                sqlite3_reset(raw)
                sqlite3_clear_bindings(raw)
            }
            // SQLITE_TRANSIENT, for blobs: SQLite copies them before the call returns.
            let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
            var text = 0
            for (k, value) in values.enumerated() {
                let index = Int32(k + 1)
                let rc: Int32
                switch value.storage {
                case .null: rc = sqlite3_bind_null(raw, index)
                case .int64(let n): rc = sqlite3_bind_int64(raw, index, n)
                case .double(let d): rc = sqlite3_bind_double(raw, index, d)
                case .string:
                    let span = spans[text]
                    text += 1
                    if span.count == 0 {
                        rc = sqlite3_bind_text(raw, index, "", 0, transient)     // a NULL pointer would bind NULL
                    } else {
                        let bytes = UnsafeRawPointer(arena.baseAddress! + span.start)
                        rc = sqlite3_bind_text(raw, index, bytes.assumingMemoryBound(to: CChar.self), Int32(span.count), nil)
                    }
                case .blob(let data) where data.isEmpty: rc = sqlite3_bind_zeroblob(raw, index, 0)   // empty, not NULL
                case .blob(let data): rc = data.withUnsafeBytes { sqlite3_bind_blob(raw, index, $0.baseAddress, Int32($0.count), transient) }
                }
                guard rc == SQLITE_OK else { throw error(rc, statement) }
            }
            var rc = sqlite3_step(raw)
            while rc == SQLITE_ROW {
                each?(sqlite3_column_int64(raw, 0), sqlite3_column_int64(raw, 1))
                rc = sqlite3_step(raw)
            }
            guard rc == SQLITE_DONE else { throw error(rc, statement) }
        }
    }

    private func error(_ rc: Int32, _ statement: Statement) -> DatabaseError {
        DatabaseError(resultCode: ResultCode(rawValue: rc), message: String(cString: sqlite3_errmsg(sqliteConnection)),
                      sql: statement.sql)
    }
}

/// "(?, ?), (?, ?)" for `rows` rows of `columns` values.
func placeholders(rows: Int, columns: Int) -> String {
    let row = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
    return Array(repeating: row, count: rows).joined(separator: ", ")
}

/// The C library's `close` (the store's own `close()` hides the name inside it).
private func closeFile(_ fd: Int32) {
    _ = close(fd)
}
