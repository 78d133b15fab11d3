/// The request body: a JSON object, kept exactly as it will be sent (compact,
/// with the author's key order and number spelling).
public struct Payload: Sendable, Hashable {
    /// The bytes sent.
    public let bytes: [UInt8]

    /// Largest broadcast (iOS 18 channel) payload APNs accepts, in bytes as sent;
    /// device pushes have `PushType.payloadLimit`.
    public static let broadcastLimit = 5120

    /// Why text cannot be a payload.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// No bytes, or only white space.
        case empty
        /// Not valid JSON: where and why.
        case notJSON(String)
        /// Valid JSON, but not an object.
        case notAnObject

        /// One line saying what is wrong.
        public var description: String {
            switch self {
            case .empty: "payload is empty"
            case .notJSON(let why): "payload is not valid JSON: \(why)"
            case .notAnObject: "payload must be a JSON object ({...})"
            }
        }
    }

    /// Validates JSON text and removes its insignificant white space.
    public init(json: some Sequence<UInt8>) throws(Payload.Error) {
        let compacted: (bytes: [UInt8], isObject: Bool)
        do {
            compacted = try JSONReader.compact(Array(json))
        } catch {
            if error == .empty { throw .empty }
            throw .notJSON(error.description)
        }
        guard compacted.isObject else { throw .notAnObject }
        bytes = compacted.bytes
    }

    /// Validates JSON text and removes its insignificant white space.
    public init(json: String) throws(Payload.Error) {
        try self.init(json: json.utf8)
    }

    /// Takes bytes as they are, unchecked: only for bytes this package already
    /// checked and compacted, or wrote itself (`init(json:)`'s or `init(aps:)`'s
    /// `bytes`, kept and read back), so that they are not read through a second time
    /// at send time. Debug builds check that they are a compact JSON object.
    package init(compactObject bytes: [UInt8]) {
        assert(Payload.isCompactObject(bytes), "\(bytes.count) bytes that are not a compact JSON object")
        self.bytes = bytes
    }

    private static func isCompactObject(_ bytes: [UInt8]) -> Bool {
        guard let compacted = try? JSONReader.compact(bytes) else { return false }
        return compacted.isObject && compacted.bytes == bytes
    }

    /// Builds `{"aps":{...}, custom keys...}`; keys keep the order given.
    public init(aps: APS, custom: KeyValuePairs<String, JSONValue> = [:]) {
        var object: [(String, JSONValue)] = [("aps", aps.jsonValue)]
        object.append(contentsOf: custom.map { ($0.key, $0.value) })
        var out: [UInt8] = []
        JSONValue.object(object).write(to: &out)
        bytes = out
    }

    /// The size in bytes as sent, which APNs' limits count.
    public var count: Int { bytes.count }
}

/// A JSON value for custom keys; objects keep their key order.
public indirect enum JSONValue: Sendable, Hashable {
    /// A string, escaped when written.
    case string(String)
    /// An integer.
    case int(Int)
    /// A floating-point number; NaN and the infinities, which JSON lacks, are written as `null`.

    case double(Double)
    /// A number exactly as written (`1e400`, a 30-digit id): what a payload read
    /// from JSON text carries, which `int` and `double` would round or turn into
    /// null. The text must be a JSON number (RFC 8259): `init(number:)` checks it.
    case number(String)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// An array.
    case array([JSONValue])
    /// An object, its members in the order given.
    case object([(String, JSONValue)])

    /// Equal when both write the same JSON text: key order counts, and `.int(1)`
    /// equals `.number("1")`.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        var x: [UInt8] = [], y: [UInt8] = []
        a.write(to: &x)
        b.write(to: &y)
        return x == y
    }

    /// Hashes the JSON text the value writes, as `==` compares it.
    public func hash(into hasher: inout Hasher) {
        var x: [UInt8] = []
        write(to: &x)
        hasher.combine(x)
    }

    func write(to out: inout [UInt8]) {
        switch self {
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .int(let n): out.append(contentsOf: String(n).utf8)
        case .double(let d):
            // JSON has no NaN or infinity; APNs would refuse the payload.
            out.append(contentsOf: (d.isFinite ? "\(d)" : "null").utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (k, item) in items.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (k, (key, value)) in members.enumerated() {
                if k > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `s` as a JSON string (quotes, backslash escapes, control characters
    /// as \u00XX): the escaping payloads are written with, shared with apns-server.
    public static func writeString(_ s: String, to out: inout [UInt8]) {
        JSONString.write(s, to: &out)
    }
}

extension JSONValue {
    /// `.number(text)` when `text` is a JSON number, nil otherwise.
    public init?(number text: String) {
        let bytes = Array(text.utf8)
        // The number alone: no white space around it, which the reader would pass over.
        guard let first = bytes.first, let last = bytes.last, first > 0x20, last > 0x20 else { return nil }
        let isNumber = (try? JSONReader.read(bytes) { (r) throws(JSONReader.Failure) -> Bool in
            _ = try r.number()
            try r.end()
            return true
        }) ?? false
        guard isNumber else { return nil }
        self = .number(text)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByFloatLiteral
{
    /// `.string(value)`, so that `"text"` is a `JSONValue`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `.int(value)`, so that `42` is a `JSONValue`.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// `.bool(value)`, so that `true` is a `JSONValue`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `.double(value)`, so that `1.5` is a `JSONValue`.
    public init(floatLiteral value: Double) { self = .double(value) }

}
