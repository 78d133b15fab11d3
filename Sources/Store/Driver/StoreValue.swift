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
}

extension Int64: StoreBindable { var storeValue: StoreValue { .int(self) } }
extension Int: StoreBindable { var storeValue: StoreValue { .int(Int64(self)) } }
extension Int32: StoreBindable { var storeValue: StoreValue { .int(Int64(self)) } }
extension String: StoreBindable { var storeValue: StoreValue { .text(self) } }
extension Bool: StoreBindable { var storeValue: StoreValue { .bool(self) } }
extension Array: StoreBindable where Element == Int64 { var storeValue: StoreValue { .ints(self) } }
extension StoreValue: StoreBindable { var storeValue: StoreValue { self } }

extension Optional: StoreBindable where Wrapped: StoreBindable {
    var storeValue: StoreValue {
        if let value = self { return value.storeValue }
        // The wrapped type's NULL: `Wrapped` names it even without a value.
        switch (Wrapped.self as Any.Type) {
        case is Int64.Type, is Int.Type, is Int32.Type: return .int(nil)
        case is Bool.Type: return .bool(nil)
        default: return .text(nil)
        }
    }
}

extension StoreValue {
    /// A list of texts (`Array<String>` cannot conform beside `Array<Int64>`).
    static func list(_ texts: [String]) -> StoreValue { .texts(texts) }
    /// A blob.
    static func blob(_ bytes: [UInt8]?) -> StoreValue { .bytes(bytes) }
}
