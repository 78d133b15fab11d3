import Foundation
@testable import Store

/// What a server test reads or changes in its server's database directly, beside
/// the server, with the same SQL on both engines (or per engine where it must be).
protocol InspectableStore: DeliveryStore {
    func scalar(_ sql: String) async throws(StoreError) -> Int64?
    func execute(_ sql: String) async throws(StoreError)
}

extension SQLiteStore: InspectableStore {}
extension PostgresStore: InspectableStore {}

extension ServerProcess {
    /// The test's own connection to this server's database: the PostgreSQL database
    /// its config names, else its SQLite file. Give it back with `close()`.
    func database() throws -> any InspectableStore {
        if let url = databaseURL { return PostgresStore(try PostgresStore.Configuration(url: url)) }
        return try store()
    }
}
