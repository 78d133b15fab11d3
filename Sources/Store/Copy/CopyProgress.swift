import Foundation
import GRDB
import PostgresNIO

/// How far a copy got, kept on the target beside the rows it copied: one row per
/// table, written in the same transaction as each batch, so what it says is
/// exactly what is committed. `last_key` is the table's last copied primary key
/// (a JSON array, in the source's key order); `done` once every row and link is in.
/// The table exists only while a copy is unfinished (`StoreCopy` drops it when the
/// counts match), and its presence is how a re-run knows the target is its own.
///
/// Beside it, `store_copy_source` says which source the copy is of (`Identity`),
/// written in the transaction that makes the progress table: a table marked done
/// is never read again, so a re-run must be from that same source, unchanged.
enum CopyProgress {
    struct State {
        var lastKey: [DatabaseValue]?
        var copied: Int
        var done: Bool
    }

    /// The source a copy is of: its path, for the message that refuses another, and
    /// its fingerprint, which decides (a file moved, unchanged, is the same source).
    struct Identity: Equatable {
        var path: String
        var fingerprint: String
    }

    /// The two tables and the source's identity, in the caller's transaction.
    static func begin(_ source: Identity, _ db: PostgresConnection) async throws {
        try await db.run("""
            CREATE TABLE store_copy_progress (
                table_name TEXT    PRIMARY KEY,
                last_key   TEXT,
                copied     BIGINT  NOT NULL,
                done       BOOLEAN NOT NULL
            )
            """)
        try await db.run("CREATE TABLE store_copy_source (path TEXT NOT NULL, fingerprint TEXT NOT NULL)")
        try await db.run("INSERT INTO store_copy_source (path, fingerprint) VALUES (\(source.path), \(source.fingerprint))")
    }

    /// The recorded source; nil when the partial copy records none.
    static func source(_ db: PostgresConnection) async throws -> Identity? {
        guard try await db.rows("SELECT to_regclass('store_copy_source') IS NOT NULL")[0].get(0, Bool.self),
              let row = try await db.rows("SELECT path, fingerprint FROM store_copy_source").first
        else { return nil }
        return Identity(path: try row.get(0, String.self), fingerprint: try row.get(1, String.self))
    }

    /// The copy is finished: both tables go, in the caller's transaction.
    static func end(_ db: PostgresConnection) async throws {
        try await db.run("DROP TABLE store_copy_progress")
        try await db.run("DROP TABLE IF EXISTS store_copy_source")
    }

    /// Every row of every table the copy reads, in key order, hashed (64-bit FNV-1a
    /// over each value's type, length and bytes), with the number of rows: any row
    /// added, removed or changed gives another. Read in the copy's own transaction,
    /// it describes exactly what the copy reads.
    static func fingerprint(_ db: Database, _ plan: CopyPlan) throws -> String {
        var hash = FNV1a()
        var rows = 0
        for table in plan.tables {
            hash.add(Array(table.name.utf8), tag: 0)
            let sql = """
                SELECT \(table.columns.map(quoted).joined(separator: ", ")) FROM \(quoted(table.name))
                ORDER BY \(table.key.map(quoted).joined(separator: ", "))
                """
            let cursor = try Row.fetchCursor(db, sql: sql)
            while let row = try cursor.next() {
                rows += 1
                for value in row.databaseValues {
                    switch value.storage {
                    case .null: hash.add([], tag: 1)
                    case .int64(let n): hash.add(withUnsafeBytes(of: n.littleEndian, Array.init), tag: 2)
                    case .double(let d): hash.add(withUnsafeBytes(of: d.bitPattern.littleEndian, Array.init), tag: 3)
                    case .string(let text): hash.add(Array(text.utf8), tag: 4)
                    case .blob(let data): hash.add(Array(data), tag: 5)
                    }
                }
            }
        }
        return "\(rows) rows, fnv1a64 \(String(hash.value, radix: 16))"
    }

    private struct FNV1a {
        var value: UInt64 = 0xcbf2_9ce4_8422_2325

        /// A value as its tag, its length, then its bytes, so that no two sequences of
        /// values run together into the same bytes.
        mutating func add(_ bytes: [UInt8], tag: UInt8) {
            byte(tag)
            withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { for b in $0 { byte(b) } }
            for b in bytes { byte(b) }
        }

        private mutating func byte(_ b: UInt8) {
            value = (value ^ UInt64(b)) &* 0x0000_0100_0000_01b3
        }
    }

    static func read(_ table: String, _ db: PostgresConnection) async throws -> State {
        let rows = try await db.rows("SELECT last_key, copied, done FROM store_copy_progress WHERE table_name = \(table)")
        guard let row = rows.first else { return State(lastKey: nil, copied: 0, done: false) }
        let key = try row.get(0, String?.self).map(decode)
        return State(lastKey: key, copied: try row.get(1, Int.self), done: try row.get(2, Bool.self))
    }

    static func save(_ table: String, _ state: State, _ db: PostgresConnection) async throws {
        let key = state.lastKey.map(encode)
        try await db.run("""
            INSERT INTO store_copy_progress (table_name, last_key, copied, done) VALUES (\(table), \(key), \(state.copied), \(state.done))
            ON CONFLICT (table_name) DO UPDATE SET last_key = EXCLUDED.last_key, copied = EXCLUDED.copied, done = EXCLUDED.done
            """)
    }

    /// Keys are integers or text (the schema has no other key columns).
    private static func encode(_ key: [DatabaseValue]) -> String {
        let values: [Any] = key.map { value in
            switch value.storage {
            case .int64(let n): n
            case .string(let s): s
            case .double(let d): d
            case .null, .blob: NSNull()
            }
        }
        let data = (try? JSONSerialization.data(withJSONObject: values)) ?? Data("[]".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private static func decode(_ text: String) throws -> [DatabaseValue] {
        guard let values = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any] else {
            throw StoreError("store_copy_progress: a last_key that is not a list: \(text)")
        }
        return values.map { value in
            switch value {
            case let s as String: s.databaseValue
            case let n as NSNumber: n.int64Value.databaseValue
            default: .null
            }
        }
    }
}
