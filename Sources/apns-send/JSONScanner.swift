/// Just enough JSON to pick fields out of one line: a results record read back for
/// `--resume`, or a line of a `--messages` file (already checked as JSON by the
/// library's compactor, so values here are well formed). Strings come back
/// unescaped, numbers as their spelling, and any value can be skipped or taken
/// as its byte span (a message's payload).
struct JSONScanner {
    /// What a value is, from its first byte.
    enum Kind: Equatable {
        case string, number, object, array, bool, null
    }

    private let bytes: [UInt8]
    private var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool {
        mutating get { skipSpace(); return i == bytes.count }
    }

    mutating func take(_ c: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == c else { return false }
        i += 1
        return true
    }

    /// The kind of the value that starts next, without consuming it.
    mutating func peekKind() -> Kind? {
        skipSpace()
        guard i < bytes.count else { return nil }
        switch bytes[i] {
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        default: return nil
        }
    }

    mutating func null() -> Bool { word("null") }

    mutating func integer() -> Int? {
        skipSpace()
        let start = i
        if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
        while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
        return Int(String(decoding: bytes[start..<i], as: UTF8.self))
    }

    /// A number's spelling as written ("10", "1e3", "-0.5").
    mutating func number() -> String? {
        skipSpace()
        let start = i
        while i < bytes.count, "-+.eE0123456789".utf8.contains(bytes[i]) { i += 1 }
        return i > start ? String(decoding: bytes[start..<i], as: UTF8.self) : nil
    }

    /// A string's bytes, unescaped; the common case (no escapes) is one copy.
    /// nil when it is not a string or holds an escape that names no character
    /// (a lone surrogate).
    mutating func string() -> [UInt8]? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = i
        while i < bytes.count, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") { i += 1 }
        var out = Array(bytes[start..<min(i, bytes.count)])
        while i < bytes.count {
            let c = bytes[i]
            i += 1
            switch c {
            case UInt8(ascii: "\""): return out
            case UInt8(ascii: "\\"):
                guard i < bytes.count, let unescaped = unescape() else { return nil }
                out.append(contentsOf: unescaped)
            default: out.append(c)
            }
        }
        return nil
    }

    /// After a backslash: the bytes it stands for.
    private mutating func unescape() -> [UInt8]? {
        let e = bytes[i]
        i += 1
        switch e {
        case UInt8(ascii: "n"): return [0x0A]
        case UInt8(ascii: "r"): return [0x0D]
        case UInt8(ascii: "t"): return [0x09]
        case UInt8(ascii: "b"): return [0x08]
        case UInt8(ascii: "f"): return [0x0C]
        case UInt8(ascii: "u"):
            guard var u = hex4() else { return nil }
            if (0xD800..<0xDC00).contains(u) {
                // A high surrogate must be followed by "\u" and a low one.
                guard i + 2 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { return nil }
                i += 2
                guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                u = 0x10000 + ((u - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let scalar = Unicode.Scalar(u) else { return nil }
            return Array(String(Character(scalar)).utf8)
        default: return [e]
        }
    }

    private mutating func hex4() -> UInt32? {
        guard i + 4 <= bytes.count, let u = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16) else { return nil }
        i += 4
        return u
    }

    /// Skips any value, nested ones included.
    mutating func skipValue() -> Bool {
        span() != nil
    }

    /// Skips any value and returns where it lay: the bytes a message's payload is sent as.
    mutating func span() -> Range<Int>? {
        guard let kind = peekKind() else { return nil }
        let start = i
        switch kind {
        case .string: guard string() != nil else { return nil }
        case .null: guard word("null") else { return nil }
        case .bool: guard word("true") || word("false") else { return nil }
        case .number: guard number() != nil else { return nil }
        case .object, .array:
            // Brackets are counted outside strings; strings are skipped whole.
            var depth = 0
            repeat {
                guard i < bytes.count else { return nil }
                switch bytes[i] {
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1; i += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1; i += 1
                case UInt8(ascii: "\""): guard string() != nil else { return nil }
                default: i += 1
                }
            } while depth > 0
        }
        return start..<i
    }

    private mutating func word(_ w: String) -> Bool {
        skipSpace()
        let w = Array(w.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { return false }
        i += w.count
        return true
    }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
    }
}
