/// Where the store lives: `sqlite:PATH` (one instance) or
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (several instances on one database).
/// The one place outside the engines' own files that names them: the service opens
/// a location and from then on sees only `DeliveryStore`.
public enum StoreLocation: Sendable, CustomStringConvertible {
    /// `durability`: what a committed transaction survives.
    case sqlite(path: String, durability: SQLiteStore.Durability)
    case postgres(PostgresStore.Configuration)

    /// Opens the store (its schema is not touched until `migrate()`).
    public func open() throws(StoreError) -> any DeliveryStore {
        switch self {
        case .sqlite(let path, let durability): try SQLiteStore(path: path, durability: durability)
        case .postgres(let configuration): PostgresStore(configuration)
        }
    }

    /// What logs and errors may say: never the password.
    public var description: String {
        switch self {
        case .sqlite(let path, _): "sqlite:\(path)"
        case .postgres(let c): "postgres://\(c)"
        }
    }
}

extension StoreLocation {
    /// A `postgres://` URL's settings (`PostgresConfiguration(url:)`), by the name the
    /// service parses them under.
    public typealias PostgresConfiguration = PostgresStore.Configuration
}
