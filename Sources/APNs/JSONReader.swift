/// The package's one JSON reader (RFC 8259, UTF-8). The payload compactor, apns-send's
/// message and record lines and apns-server's request bodies all read through it, so
/// that one grammar decides what is JSON and one set of messages says why not. It
/// checks as it goes: syntax, escapes, depth, and UTF-8 (no overlong forms, no
/// surrogates, nothing past U+10FFFF).
///
/// Two ways in:
/// - `compact(_:)` checks one value and removes the white space between tokens,
///   keeping everything else byte for byte: key order, number spelling and string
///   escapes stay as the author wrote them, so the device gets what the user wrote, at
///   its smallest.
/// - `read(_:rules:_:)` hands a pull reader to a body: `members` and `items` walk a
///   container, `string` and `number` read a scalar, `skipValue` checks a value and
///   gives its span (bytes kept as written: a message's payload).
///
/// White space only ever sits between tokens, and `skipSpace` is the one place it is
/// passed over, so a compact text is the input minus the runs `skipSpace` skipped:
/// those runs are cut out with a copy of the text between them. Text that is compact
/// already (what a program writes, one payload per event) is returned as it came,
/// with no copy at all.
package struct JSONReader {
    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// No value: nothing, or only white space.
        case empty
        case syntax(offset: Int, expected: String)
        case invalidUTF8(offset: Int)
        case tooDeep(limit: Int)
        /// `Rules.uniqueKeys`: an object names a key twice.
        case duplicateKey(String, offset: Int)
        /// `Rules.noNUL`: a string holds U+0000.
        case nul(offset: Int)

        /// What is wrong, and where (a byte offset into the text).
        package var description: String {
            switch self {
            case .empty: "no value"
            case .syntax(let offset, let expected): "expected \(expected) at byte \(offset)"
            case .invalidUTF8(let offset): "invalid UTF-8 at byte \(offset)"
            case .tooDeep(let limit): "nested deeper than \(limit) levels"
            case .duplicateKey(let key, let offset):
                "duplicate key \(JSONReader.quoted(key)) at byte \(offset)"
            case .nul(let offset): "U+0000 in a string at byte \(offset)"
            }
        }
    }

    /// A key as JSON (control characters escaped), cut short when long.
    fileprivate static func quoted(_ key: String) -> String {
        var out: [UInt8] = []
        JSONString.write(key.count > 64 ? String(key.prefix(64)) + "…" : key, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// What a reading refuses beyond RFC 8259. `compact` takes the defaults: a payload
    /// goes to APNs as it was written.
    package struct Rules: Sendable {
        /// Containers inside containers, at most: a hostile text cannot exhaust the stack.
        package var maxDepth = 64
        /// An object with a key twice is refused, in the objects `members` reads: which
        /// one counts differs from reader to reader (a look-up takes the first, APNs and
        /// other parsers the last), so every reader could see another value.
        package var uniqueKeys = false
        /// U+0000 in a string `string` decodes is refused: SQLite's C API ends a text
        /// there and PostgreSQL refuses it, so what was stored would not be what was sent.
        package var noNUL = false

        package init(maxDepth: Int = 64, uniqueKeys: Bool = false, noNUL: Bool = false) {
            self.maxDepth = maxDepth
            self.uniqueKeys = uniqueKeys
            self.noNUL = noNUL
        }
    }

    /// What a value is, from its first byte.
    package enum Kind: Equatable, Sendable {
        case string, number, object, array, bool, null
    }

    /// Read through a buffer pointer: array subscripts cost a bounds check a byte.
    private let input: UnsafeBufferPointer<UInt8>
    private let rules: Rules
    private var i = 0
    private var depth = 0
    /// `compact` only: the compact text of `input[..<copied]`; empty until white space is first found.
    private let compacting: Bool
    private var output: [UInt8] = []
    /// Where the input not yet in `output` starts: 0 while no white space was found.
    private var copied = 0

    private init(input: UnsafeBufferPointer<UInt8>, rules: Rules, compacting: Bool) {
        self.input = input
        self.rules = rules
        self.compacting = compacting
    }

    /// Returns the compact bytes and whether the top-level value is an object.
    package static func compact(_ bytes: [UInt8]) throws(Failure) -> (bytes: [UInt8], isObject: Bool) {
        let (compacted, isObject) = try bytes.withUnsafeBufferPointer {
            (input) throws(Failure) -> ([UInt8]?, Bool) in
            var c = JSONReader(input: input, rules: Rules(), compacting: true)
            c.skipSpace()
            guard c.i < input.count else { throw .empty }
            let isObject = input[c.i] == UInt8(ascii: "{")
            try c.value()
            try c.end()
            if c.copied == 0 { return (nil, isObject) }
            c.output.append(contentsOf: input[c.copied...])
            return (c.output, isObject)
        }
        return (compacted ?? bytes, isObject)
    }

    /// Runs `body` with a reader at the start of `bytes`. What the body does not read
    /// is not checked: a body that reads one value and no more calls `end()`.
    package static func read<T>(_ bytes: [UInt8], rules: Rules = Rules(),
                                _ body: (inout JSONReader) throws(Failure) -> T) throws(Failure) -> T {
        try bytes.withUnsafeBufferPointer { (input) throws(Failure) -> T in
            var reader = JSONReader(input: input, rules: rules, compacting: false)
            return try body(&reader)
        }
    }

    // MARK: Pulling values

    /// Where the reader stands: a byte offset into the text.
    package var offset: Int { i }

    /// The kind of the value that starts next (after white space), without taking it;
    /// nil when no value can start there.
    package mutating func peekKind() -> Kind? {
        skipSpace()
        switch peek() {
        case UInt8(ascii: "\"")?: return .string
        case UInt8(ascii: "{")?: return .object
        case UInt8(ascii: "[")?: return .array
        case UInt8(ascii: "t")?, UInt8(ascii: "f")?: return .bool
        case UInt8(ascii: "n")?: return .null
        case UInt8(ascii: "-")?, (UInt8(ascii: "0")...UInt8(ascii: "9"))?: return .number
        default: return nil
        }
    }

    /// Only white space may follow.
    package mutating func end() throws(Failure) {
        skipSpace()
        guard i == input.count else { throw .syntax(offset: i, expected: "end of input") }
    }

    /// Each member of the object that starts next, its key decoded, in the order
    /// written. A member whose value `body` leaves unread is checked and skipped.
    package mutating func members(_ body: (_ key: String, inout JSONReader) throws(Failure) -> Void) throws(Failure) {
        try enter(UInt8(ascii: "{"), "an object")
        var keys: Set<String> = []
        skipSpace()
        if peek() == UInt8(ascii: "}") {
            i += 1
            depth -= 1
            return
        }
        while true {
            skipSpace()
            guard peek() == UInt8(ascii: "\"") else { throw .syntax(offset: i, expected: "a string key") }
            let keyAt = i
            let key = try string()
            if rules.uniqueKeys, !keys.insert(key).inserted { throw .duplicateKey(key, offset: keyAt) }
            skipSpace()
            try expect(UInt8(ascii: ":"), "':'")
            skipSpace()
            let before = i
            try body(key, &self)
            if i == before { try value() }
            skipSpace()
            if peek() == UInt8(ascii: ",") {
                i += 1
                continue
            }
            try expect(UInt8(ascii: "}"), "',' or '}'")
            depth -= 1
            return
        }
    }

    /// Each item of the array that starts next. An item `body` leaves unread is
    /// checked and skipped.
    package mutating func items(_ body: (inout JSONReader) throws(Failure) -> Void) throws(Failure) {
        try enter(UInt8(ascii: "["), "an array")
        skipSpace()
        if peek() == UInt8(ascii: "]") {
            i += 1
            depth -= 1
            return
        }
        while true {
            skipSpace()
            let before = i
            try body(&self)
            if i == before { try value() }
            skipSpace()
            if peek() == UInt8(ascii: ",") {
                i += 1
                continue
            }
            try expect(UInt8(ascii: "]"), "',' or ']'")
            depth -= 1
            return
        }
    }

    /// The string that starts next, unescaped. An escape must name a character: a
    /// surrogate comes in a pair.
    package mutating func string() throws(Failure) -> String {
        skipSpace()
        try expect(UInt8(ascii: "\""), "a string")
        var out: [UInt8] = []
        var run = i
        while true {
            guard let c = peek() else { throw .syntax(offset: i, expected: "'\"'") }
            switch c {
            case UInt8(ascii: "\""):
                out.append(contentsOf: input[run..<i])
                i += 1
                // Checked as UTF-8 on the way: decoding repairs nothing.
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                out.append(contentsOf: input[run..<i])
                let escapeAt = i
                i += 1
                guard let e = peek() else { throw .syntax(offset: i, expected: "an escape") }
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard i + 1 < input.count, input[i] == UInt8(ascii: "\\"), input[i + 1] == UInt8(ascii: "u") else {
                            throw .syntax(offset: i, expected: "a low surrogate")
                        }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw .syntax(offset: i - 4, expected: "a low surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    if scalar == 0, rules.noNUL { throw .nul(offset: escapeAt) }
                    guard let u = Unicode.Scalar(scalar) else { throw .syntax(offset: escapeAt, expected: "a Unicode scalar") }
                    out.append(contentsOf: String(Character(u)).utf8)
                default:
                    throw .syntax(offset: i - 1, expected: "a valid escape")
                }
                run = i
            case 0x00..<0x20:
                throw .syntax(offset: i, expected: "no control character inside a string")
            case 0x80...:
                try utf8Sequence()
            default:
                i += 1
            }
        }
    }

    /// The number that starts next, as written ("10", "1e3", "-0.5").
    package mutating func number() throws(Failure) -> String {
        skipSpace()
        let start = i
        try skipNumber()
        return String(decoding: input[start..<i], as: UTF8.self)
    }

    /// `true` or `false`.
    package mutating func bool() throws(Failure) -> Bool {
        skipSpace()
        if peek() == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    /// Takes a `null` when one comes next; false (taking nothing) otherwise.
    package mutating func null() throws(Failure) -> Bool {
        skipSpace()
        guard peek() == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    /// Checks the value that starts next, whatever it is, and returns where it lay.
    package mutating func skipValue() throws(Failure) -> Range<Int> {
        skipSpace()
        let start = i
        try value()
        return start..<i
    }

    // MARK: The grammar

    /// Passes over white space, and, compacting, cuts the run out of the output.
    private mutating func skipSpace() {
        let start = i
        scan: while i < input.count {
            switch input[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: break scan
            }
        }
        guard compacting, i > start else { return }
        if copied == 0 { output.reserveCapacity(input.count - (i - start)) }
        output.append(contentsOf: input[copied..<start])
        copied = i
    }

    private func peek() -> UInt8? { i < input.count ? input[i] : nil }

    private mutating func expect(_ c: UInt8, _ what: String) throws(Failure) {
        guard peek() == c else { throw .syntax(offset: i, expected: what) }
        i += 1
    }

    private mutating func enter(_ open: UInt8, _ what: String) throws(Failure) {
        skipSpace()
        guard peek() == open else { throw .syntax(offset: i, expected: what) }
        depth += 1
        guard depth <= rules.maxDepth else { throw .tooDeep(limit: rules.maxDepth) }
        i += 1
    }

    /// One value, checked and passed over (its strings are not decoded).
    private mutating func value() throws(Failure) {
        skipSpace()
        guard let c = peek() else { throw .syntax(offset: i, expected: "a value") }
        switch c {
        case UInt8(ascii: "{"): try container(close: UInt8(ascii: "}"), keyed: true)
        case UInt8(ascii: "["): try container(close: UInt8(ascii: "]"), keyed: false)
        case UInt8(ascii: "\""): try skipString()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try skipNumber()
        default: throw .syntax(offset: i, expected: "a value")
        }
    }

    private mutating func container(close: UInt8, keyed: Bool) throws(Failure) {
        depth += 1
        guard depth <= rules.maxDepth else { throw .tooDeep(limit: rules.maxDepth) }
        i += 1
        skipSpace()
        if peek() == close {
            i += 1
            depth -= 1
            return
        }
        while true {
            if keyed {
                skipSpace()
                guard peek() == UInt8(ascii: "\"") else { throw .syntax(offset: i, expected: "a string key") }
                try skipString()
                skipSpace()
                try expect(UInt8(ascii: ":"), "':'")
            }
            try value()
            skipSpace()
            if peek() == UInt8(ascii: ",") {
                i += 1
                continue
            }
            try expect(close, keyed ? "',' or '}'" : "',' or ']'")
            depth -= 1
            return
        }
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let bytes = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard input.count - i >= bytes.count, input[i..<i + bytes.count].elementsEqual(bytes) else {
            throw .syntax(offset: i, expected: "\(word)")
        }
        i += bytes.count
    }

    private mutating func skipNumber() throws(Failure) {
        if peek() == UInt8(ascii: "-") { i += 1 }
        guard let first = peek(), isDigit(first) else { throw .syntax(offset: i, expected: "a digit") }
        i += 1
        if first != UInt8(ascii: "0") { digits() }
        if peek() == UInt8(ascii: ".") {
            i += 1
            guard let d = peek(), isDigit(d) else { throw .syntax(offset: i, expected: "a digit") }
            digits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            i += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { i += 1 }
            guard let d = peek(), isDigit(d) else { throw .syntax(offset: i, expected: "a digit") }
            digits()
        }
    }

    private func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }
    private mutating func digits() { while let c = peek(), isDigit(c) { i += 1 } }

    /// A string checked and passed over, its escapes as written.
    private mutating func skipString() throws(Failure) {
        i += 1
        while true {
            guard let c = peek() else { throw .syntax(offset: i, expected: "'\"'") }
            switch c {
            case UInt8(ascii: "\""):
                i += 1
                return
            case UInt8(ascii: "\\"):
                i += 1
                guard let e = peek() else { throw .syntax(offset: i, expected: "an escape") }
                if e == UInt8(ascii: "u") {
                    for k in 1...4 {
                        guard i + k < input.count, input[i + k].isHexDigit else {
                            throw .syntax(offset: i + k, expected: "a hex digit")
                        }
                    }
                    i += 5
                } else if "\"\\/bfnrt".utf8.contains(e) {
                    i += 1
                } else {
                    throw .syntax(offset: i, expected: "a valid escape")
                }
            case 0x00..<0x20:
                throw .syntax(offset: i, expected: "no control character inside a string")
            case 0x80...:
                try utf8Sequence()
            default:
                i += 1
            }
        }
    }

    /// Four hex digits after `\u`.
    private mutating func hex4() throws(Failure) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let c = peek() else { throw .syntax(offset: i, expected: "a hex digit") }
            let d: UInt32
            switch c {
            case 0x30...0x39: d = UInt32(c - 0x30)
            case 0x41...0x46: d = UInt32(c - 0x41 + 10)
            case 0x61...0x66: d = UInt32(c - 0x61 + 10)
            default: throw .syntax(offset: i, expected: "a hex digit")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    /// One multi-byte UTF-8 scalar: no overlongs, no surrogates, nothing past U+10FFFF.
    private mutating func utf8Sequence() throws(Failure) {
        let c = input[i]
        let (count, low, high): (Int, UInt8, UInt8)
        switch c {
        case 0xC2...0xDF: (count, low, high) = (1, 0x80, 0xBF)
        case 0xE0: (count, low, high) = (2, 0xA0, 0xBF)
        case 0xED: (count, low, high) = (2, 0x80, 0x9F)
        case 0xE1...0xEF: (count, low, high) = (2, 0x80, 0xBF)
        case 0xF0: (count, low, high) = (3, 0x90, 0xBF)
        case 0xF4: (count, low, high) = (3, 0x80, 0x8F)
        case 0xF1...0xF3: (count, low, high) = (3, 0x80, 0xBF)
        default: throw .invalidUTF8(offset: i)
        }
        guard i + count < input.count, (low...high).contains(input[i + 1]) else { throw .invalidUTF8(offset: i) }
        for k in stride(from: 2, through: count, by: 1) {
            guard (0x80...0xBF).contains(input[i + k]) else { throw .invalidUTF8(offset: i) }
        }
        i += count + 1
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x41...0x46).contains(self) || (0x61...0x66).contains(self)
    }
}
