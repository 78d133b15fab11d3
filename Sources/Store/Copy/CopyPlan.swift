import GRDB

/// What `StoreCopy` copies: every table of the schema, read from the schema itself
/// rather than listed by hand, so a step that adds a table or a column is copied
/// with no change here.
///
/// The plan is the schema's SQLite spelling applied to an empty in-memory database:
/// its tables, their columns and primary keys, and the order their foreign keys
/// need (a parent before its children). The same steps make the PostgreSQL side,
/// with the same table and column names.
struct CopyPlan: Sendable {
    struct Table: Sendable {
        let name: String
        let columns: [String]
        /// The primary key's columns, in key order: rows are copied in this order,
        /// and a resumed copy starts after the last key copied.
        let key: [String]
        /// Columns that refer to this table's own key (`deliveries.carried_by`). A
        /// row may name one copied later; see `StoreCopy.copyBatch`.
        let selfReferences: [String]
        /// Rows the schema's steps themselves insert (`device_changes`' one row): a
        /// new database already has them, so they do not make a target non-empty.
        let seededRows: Int
    }

    /// Parents before children.
    let tables: [Table]

    static let current: CopyPlan = {
        do {
            return try make()
        } catch {
            fatalError("the schema's own steps do not apply to an empty database: \(error)")
        }
    }()

    private static func make() throws -> CopyPlan {
        let db = try DatabaseQueue()
        return try db.write { db in
            try Migrations.apply(db)
            let names = try String.fetchAll(db, sql: """
                SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name
                """)
            var tables: [String: Table] = [:]
            var parents: [String: Set<String>] = [:]
            for name in names {
                let info = try Row.fetchAll(db, sql: "SELECT name, pk FROM pragma_table_info(?) ORDER BY cid",
                                            arguments: [name])
                let columns: [String] = info.map { $0["name"] }
                let key = info.filter { ($0["pk"] as Int) > 0 }.sorted { ($0["pk"] as Int) < ($1["pk"] as Int) }
                    .map { $0["name"] as String }
                let references = try Row.fetchAll(db, sql: "SELECT \"table\", \"from\" FROM pragma_foreign_key_list(?)",
                                                  arguments: [name])
                parents[name] = Set(references.map { $0["table"] as String }).subtracting([name])
                let seeded = try Int.fetchOne(db, sql: "SELECT count(*) FROM \"\(name)\"") ?? 0
                tables[name] = Table(name: name, columns: columns, key: key,
                                     selfReferences: references.filter { ($0["table"] as String) == name }
                                         .map { $0["from"] as String },
                                     seededRows: seeded)
            }
            // Parents first; among tables free to go, by name, so the order is stable.
            var ordered: [Table] = []
            var placed: Set<String> = []
            while placed.count < names.count {
                guard let next = names.first(where: { !placed.contains($0) && parents[$0]!.isSubset(of: placed) }) else {
                    throw StoreError("the schema's foreign keys form a cycle")
                }
                ordered.append(tables[next]!)
                placed.insert(next)
            }
            return CopyPlan(tables: ordered)
        }
    }
}
