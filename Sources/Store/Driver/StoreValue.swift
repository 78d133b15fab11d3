/// A statement's argument, as the store's policy hands it to either engine. Each
/// driver binds it in its own way: SQLite keeps booleans as 0/1 and takes a list as
/// one JSON text (`json_each`), PostgreSQL binds typed values and arrays. A nil
/// keeps its type, so that PostgreSQL knows the column a NULL stands for.
enum StoreValue: Sendable {
    case int(Int64?)
    case text(String?)
    case bytes([UInt8]?)
    case bool(Bool?)
    case ints([Int64])
    case texts([String])
}

/// A Swift value that binds as a `StoreValue`: what lets a call site pass
/// `[notificationID, now, limit]` as they are.
protocol StoreBindable: Sendable {
    var storeValue: StoreValue { get }
    /// This type's NULL, so that an Optional of it binds typed without a value.
    static var null: StoreValue { get }
}

extension Int64: StoreBindable {
    var storeValue: StoreValue { .int(self) }
    static var null: StoreValue { .int(nil) }
}
extension Int: StoreBindable {
    var storeValue: StoreValue { .int(Int64(self)) }
    static var null: StoreValue { .int(nil) }
}
extension Int32: StoreBindable {
    var storeValue: StoreValue { .int(Int64(self)) }
    static var null: StoreValue { .int(nil) }
}
extension String: StoreBindable {
    var storeValue: StoreValue { .text(self) }
    static var null: StoreValue { .text(nil) }
}
extension Bool: StoreBindable {
    var storeValue: StoreValue { .bool(self) }
    static var null: StoreValue { .bool(nil) }
}
extension Array: StoreBindable where Element == Int64 {
    var storeValue: StoreValue { .ints(self) }
    static var null: StoreValue { .ints([]) }
}
extension StoreValue: StoreBindable {
    var storeValue: StoreValue { self }
    static var null: StoreValue { .text(nil) }
}

extension Optional: StoreBindable where Wrapped: StoreBindable {
    var storeValue: StoreValue { self?.storeValue ?? Wrapped.null }
    static var null: StoreValue { Wrapped.null }
}

extension StoreValue {
    /// A list of texts (`Array<String>` cannot conform beside `Array<Int64>`).
    static func list(_ texts: [String]) -> StoreValue { .texts(texts) }
    /// A blob.
    static func blob(_ bytes: [UInt8]?) -> StoreValue { .bytes(bytes) }
}
