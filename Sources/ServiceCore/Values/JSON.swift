import APNs
/// A JSON value that keeps what Foundation's types lose and the contracts need:
/// the order of an object's keys (answers are compared byte for byte, and a
/// notification's `data` keys go into the payload in the order the backend wrote
/// them), numbers spelled as sent, and true/false apart from 1/0 (a preference
/// must be a boolean, not a number).
package enum JSON: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number's text as written (validated JSON number syntax).
    case number(String)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    package static func == (a: JSON, b: JSON) -> Bool { a.bytes == b.bytes }

    package static func int(_ n: Int) -> JSON { .number(String(n)) }
    package static func int64(_ n: Int64) -> JSON { .number(String(n)) }

    /// A member of an object (the first with that key), nil otherwise.
    package subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    package var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    package var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    package var isNull: Bool { if case .null = self { true } else { false } }

    /// An integer, when the number has no fraction or exponent and fits.
    package var intValue: Int? {
        guard case .number(let text) = self, !text.contains(where: { ".eE".contains($0) }) else { return nil }
        return Int(text)
    }

    /// A whole number however it is written: `1282`, `1282.0`, `1.282e3`. JSON Schema's
    /// "integer" (the OpenAPI document's `UnixSeconds`) is any number without a
    /// fraction, whatever its spelling, so the server takes what the document allows.
    /// Nil for a fraction, or beyond ±`integralLimit` (the document's maximum).
    package var integralValue: Int64? {
        guard case .number(let text) = self else { return nil }
        let n: Int64
        if let exact = Int64(text) {
            n = exact
        } else {
            guard let d = Double(text), d.isFinite, d == d.rounded(), abs(d) <= Double(Self.integralLimit) else { return nil }
            n = Int64(d)
        }
        return (-Self.integralLimit...Self.integralLimit).contains(n) ? n : nil
    }

    static let integralLimit: Int64 = 9_200_000_000_000_000_000

    // MARK: Writing

    /// Compact text (no insignificant white space).
    package var bytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out)
        return out
    }

    var text: String { String(decoding: bytes, as: UTF8.self) }

    func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): JSON.writeString(s, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSON.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ s: String, to out: inout [UInt8]) {
        JSONValue.writeString(s, to: &out)
    }

    // MARK: Parsing

    package struct ParseError: Error, CustomStringConvertible {
        package let description: String
    }

    /// Parses one JSON text with the package's reader (`JSONReader`), at most
    /// `maxDepth` levels deep so that a hostile body cannot exhaust the stack.
    ///
    /// Stricter than RFC 8259 in two ways, so that every reader sees the same value:
    /// an object with a key twice is refused (which one counts differs from reader to
    /// reader: a look-up here takes the first, APNs and other parsers the last), and
    /// so is U+0000 in a string (SQLite's C API ends a text there, PostgreSQL refuses
    /// it: what was stored would not be what was sent).
    package static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(ParseError) -> JSON {
        let rules = JSONReader.Rules(maxDepth: maxDepth, uniqueKeys: true, noNUL: true)
        do {
            return try JSONReader.read(Array(bytes), rules: rules) { (reader) throws(JSONReader.Failure) -> JSON in
                let value = try read(&reader)
                try reader.end()
                return value
            }
        } catch {
            throw ParseError(description: "invalid JSON: \(error)")
        }
    }

    private static func read(_ reader: inout JSONReader) throws(JSONReader.Failure) -> JSON {
        switch reader.peekKind() {
        case .object?:
            var members: [(String, JSON)] = []
            try reader.members { (key, reader) throws(JSONReader.Failure) in members.append((key, try read(&reader))) }
            return .object(members)
        case .array?:
            var items: [JSON] = []
            try reader.items { (reader) throws(JSONReader.Failure) in items.append(try read(&reader)) }
            return .array(items)
        case .string?: return .string(try reader.string())
        case .number?: return .number(try reader.number())
        case .bool?: return .bool(try reader.bool())
        case .null?:
            _ = try reader.null()
            return .null
        case nil: throw .syntax(offset: reader.offset, expected: "a value")
        }
    }
}
