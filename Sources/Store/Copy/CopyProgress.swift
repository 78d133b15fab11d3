import Foundation
import GRDB
import PostgresNIO

/// How far a copy got, kept on the target beside the rows it copied: one row per
/// table, written in the same transaction as each batch, so what it says is
/// exactly what is committed. `last_key` is the table's last copied primary key
/// (a JSON array, in the source's key order); `done` once every row and link is in.
/// The table exists only while a copy is unfinished (`StoreCopy` drops it when the
/// counts match), and its presence is how a re-run knows the target is its own.
enum CopyProgress {
    struct State {
        var lastKey: [DatabaseValue]?
        var copied: Int
        var done: Bool
    }

    static let create: PostgresQuery = """
        CREATE TABLE IF NOT EXISTS store_copy_progress (
            table_name TEXT    PRIMARY KEY,
            last_key   TEXT,
            copied     BIGINT  NOT NULL,
            done       BOOLEAN NOT NULL
        )
        """

    static let drop: PostgresQuery = "DROP TABLE store_copy_progress"

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
