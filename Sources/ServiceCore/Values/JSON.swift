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

    /// Parses one JSON text (RFC 8259), at most `maxDepth` levels deep so that a
    /// hostile body cannot exhaust the stack.
    ///
    /// Stricter than RFC 8259 in two ways, so that every reader sees the same value:
    /// an object with a key twice is refused (which one counts differs from reader to
    /// reader: a look-up here takes the first, APNs and other parsers the last), and
    /// so is U+0000 in a string (SQLite's C API ends a text there, PostgreSQL refuses
    /// it: what was stored would not be what was sent).
    package static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(ParseError) -> JSON {
        var parser = Parser(bytes: Array(bytes), maxDepth: maxDepth)
        parser.skipSpace()
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.at == parser.bytes.count else { throw parser.fail("end of input") }
        return value
    }

    private struct Parser {
        let bytes: [UInt8]
        let maxDepth: Int
        var at = 0

        init(bytes: [UInt8], maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        func fail(_ expected: String) -> ParseError {
            ParseError(description: "invalid JSON: expected \(expected) at byte \(at)")
        }

        /// The key is quoted as JSON (its control characters escaped), cut short when long.
        func duplicate(_ key: String, at offset: Int) -> ParseError {
            var quoted: [UInt8] = []
            JSON.writeString(key.count > 64 ? String(key.prefix(64)) + "…" : key, to: &quoted)
            return ParseError(description: "invalid JSON: duplicate key \(String(decoding: quoted, as: UTF8.self)) at byte \(offset)")
        }

        mutating func skipSpace() {
            while at < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[at]) { at += 1 }
        }

        mutating func literal(_ word: String, _ value: JSON) throws(ParseError) -> JSON {
            let w = Array(word.utf8)
            guard at + w.count <= bytes.count, Array(bytes[at..<at + w.count]) == w else { throw fail(word) }
            at += w.count
            return value
        }

        mutating func value(depth: Int) throws(ParseError) -> JSON {
            guard at < bytes.count else { throw fail("a value") }
            switch bytes[at] {
            case UInt8(ascii: "{"):
                guard depth < maxDepth else { throw ParseError(description: "invalid JSON: nested deeper than \(maxDepth) levels") }
                at += 1
                var members: [(String, JSON)] = []
                var keys: Set<String> = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members) }
                while true {
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw fail("a key") }
                    let keyStart = at
                    let key = try string()
                    guard keys.insert(key).inserted else { throw duplicate(key, at: keyStart) }
                    skipSpace()
                    guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("':'") }
                    at += 1
                    skipSpace()
                    members.append((key, try value(depth: depth + 1)))
                    skipSpace()
                    guard at < bytes.count else { throw fail("',' or '}'") }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                    if bytes[at] == UInt8(ascii: "}") { at += 1; return .object(members) }
                    throw fail("',' or '}'")
                }
            case UInt8(ascii: "["):
                guard depth < maxDepth else { throw ParseError(description: "invalid JSON: nested deeper than \(maxDepth) levels") }
                at += 1
                var items: [JSON] = []
                skipSpace()
                if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
                while true {
                    skipSpace()
                    items.append(try value(depth: depth + 1))
                    skipSpace()
                    guard at < bytes.count else { throw fail("',' or ']'") }
                    if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                    if bytes[at] == UInt8(ascii: "]") { at += 1; return .array(items) }
                    throw fail("',' or ']'")
                }
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): return try literal("true", .bool(true))
            case UInt8(ascii: "f"): return try literal("false", .bool(false))
            case UInt8(ascii: "n"): return try literal("null", .null)
            default: return try number()
            }
        }

        mutating func digits() -> Int {
            let start = at
            while at < bytes.count, bytes[at] >= 0x30, bytes[at] <= 0x39 { at += 1 }
            return at - start
        }

        mutating func number() throws(ParseError) -> JSON {
            let start = at
            if at < bytes.count, bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard at < bytes.count, bytes[at] >= 0x30, bytes[at] <= 0x39 else { throw fail("a value") }
            if bytes[at] == 0x30 { at += 1 } else { _ = digits() }
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                at += 1
                guard digits() > 0 else { throw fail("a digit") }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard digits() > 0 else { throw fail("a digit") }
            }
            return .number(String(decoding: bytes[start..<at], as: UTF8.self))
        }

        mutating func hex4() throws(ParseError) -> UInt32 {
            guard at + 4 <= bytes.count else { throw fail("4 hex digits") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[at]
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x41 + 10)
                case 0x61...0x66: d = UInt32(c - 0x61 + 10)
                default: throw fail("a hex digit")
                }
                v = v << 4 | d
                at += 1
            }
            return v
        }

        mutating func string() throws(ParseError) -> String {
            at += 1  // the opening quote
            var out: [UInt8] = []
            while true {
                guard at < bytes.count else { throw fail("'\"'") }
                let c = bytes[at]
                at += 1
                switch c {
                case UInt8(ascii: "\""):
                    // Invalid UTF-8 is refused rather than repaired: it would change the text.
                    guard let s = String(validating: out, as: UTF8.self) else {
                        throw ParseError(description: "invalid JSON: a string is not valid UTF-8")
                    }
                    return s
                case UInt8(ascii: "\\"):
                    guard at < bytes.count else { throw fail("an escape") }
                    let e = bytes[at]
                    at += 1
                    switch e {
                    case UInt8(ascii: "\""): out.append(0x22)
                    case UInt8(ascii: "\\"): out.append(0x5C)
                    case UInt8(ascii: "/"): out.append(0x2F)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"):
                        var scalar = try hex4()
                        if (0xD800..<0xDC00).contains(scalar) {
                            guard at + 2 <= bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                                throw fail("a low surrogate")
                            }
                            at += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("a low surrogate") }
                            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard scalar != 0 else {
                            throw ParseError(description: "invalid JSON: U+0000 in a string at byte \(at - 6)")
                        }
                        guard let u = Unicode.Scalar(scalar) else { throw fail("a Unicode scalar") }
                        out.append(contentsOf: Array(String(Character(u)).utf8))
                    default: throw fail("an escape")
                    }
                case 0x00..<0x20: throw fail("no control character in a string")
                default: out.append(c)
                }
            }
        }
    }
}
