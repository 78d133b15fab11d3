import PostgresNIO

/// The PostgreSQL driver: a pooled connection inside one of its transactions.
struct PostgresTransaction: StoreConnection {
    let connection: PostgresConnection
    var engine: Engine { .postgres }

    func rows(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws -> [PostgresRandomAccessRow] {
        try await connection.rows(PostgresQuery(unsafeSQL: statement.postgres, binds: Self.bind(arguments)))
    }

    func forEachRow(_ statement: Spelling, _ arguments: [any StoreBindable],
                    _ body: (PostgresRandomAccessRow) throws -> Void) async throws {
        for row in try await rows(statement, arguments) { try body(row) }
    }

    func run(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws {
        _ = try await rows(statement, arguments)
    }

    func wakeWorkers() async throws {
        try await connection.run("SELECT pg_notify(\(PostgresStore.workChannel), '')")
    }

    static func bind(_ arguments: [any StoreBindable]) -> PostgresBindings {
        var binds = PostgresBindings(capacity: arguments.count)
        for argument in arguments {
            switch argument.storeValue {
            case .int(let n): binds.append(n)
            case .text(let s): binds.append(s)
            case .bytes(let b): binds.append(b.map { ByteBuffer(bytes: $0) })
            case .bool(let b): binds.append(b)
            case .ints(let list): binds.append(list)
            case .texts(let list): binds.append(list)
            }
        }
        return binds
    }
}

extension PostgresStore: StoreEngine {
    func writing<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (PostgresTransaction) async throws -> T) async throws(StoreError) -> T {
        try await transaction(doing) { connection in try await body(PostgresTransaction(connection: connection)) }
    }

    /// REPEATABLE READ: one snapshot for the whole body, as SQLite's read transaction.
    func reading<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (PostgresTransaction) async throws -> T) async throws(StoreError) -> T {
        try await transaction(doing, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { connection in
            try await body(PostgresTransaction(connection: connection))
        }
    }
}
