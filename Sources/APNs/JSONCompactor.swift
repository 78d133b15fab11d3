/// Checks that bytes are one JSON value (RFC 8259, UTF-8) and removes the white
/// space between tokens, keeping everything else byte for byte: key order, number
/// spelling and string escapes stay as the author wrote them, so the device gets
/// what the user wrote, at its smallest.
///
/// White space only ever sits between tokens, and `skipSpace` is the one place it
/// is passed over, so the compact text is the input minus the runs `skipSpace`
/// skipped: those runs are cut out with a copy of the text between them. Text that
/// is compact already (what a program writes, one payload per event) is returned
/// as it came, with no copy at all.
struct JSONCompactor {
    enum Failure: Error, Equatable {
        case empty
        case syntax(offset: Int, expected: String)
        case invalidUTF8(offset: Int)
        case tooDeep(limit: Int)
    }

    static let maxDepth = 64

    /// Read through a buffer pointer: array subscripts cost a bounds check a byte.
    private let input: UnsafeBufferPointer<UInt8>
    private var i = 0
    private var depth = 0
    /// The compact text of `input[..<copied]`; empty until white space is first found.
    private var output: [UInt8] = []
    /// Where the input not yet in `output` starts: 0 while no white space was found.
    private var copied = 0

    /// Returns the compact bytes and whether the top-level value is an object.
    static func compact(_ bytes: [UInt8]) throws(Failure) -> (bytes: [UInt8], isObject: Bool) {
        let (compacted, isObject) = try bytes.withUnsafeBufferPointer {
            (input) throws(Failure) -> ([UInt8]?, Bool) in
            var c = JSONCompactor(input: input)
            c.skipSpace()
            guard c.i < input.count else { throw .empty }
            let isObject = input[c.i] == UInt8(ascii: "{")
            try c.value()
            c.skipSpace()
            guard c.i == input.count else { throw .syntax(offset: c.i, expected: "end of input") }
            if c.copied == 0 { return (nil, isObject) }
            c.output.append(contentsOf: input[c.copied...])
            return (c.output, isObject)
        }
        return (compacted ?? bytes, isObject)
    }

    private init(input: UnsafeBufferPointer<UInt8>) { self.input = input }

    /// Passes over white space, and cuts the run out of the output when there was one.
    private mutating func skipSpace() {
        let start = i
        scan: while i < input.count {
            switch input[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: break scan
            }
        }
        guard i > start else { return }
        if copied == 0 { output.reserveCapacity(input.count - (i - start)) }
        output.append(contentsOf: input[copied..<start])
        copied = i
    }

    private func peek() -> UInt8? { i < input.count ? input[i] : nil }

    private mutating func expect(_ c: UInt8, _ what: String) throws(Failure) {
        guard peek() == c else { throw .syntax(offset: i, expected: what) }
        i += 1
    }

    private mutating func value() throws(Failure) {
        skipSpace()
        guard let c = peek() else { throw .syntax(offset: i, expected: "a value") }
        switch c {
        case UInt8(ascii: "{"): try container(close: UInt8(ascii: "}"), keyed: true)
        case UInt8(ascii: "["): try container(close: UInt8(ascii: "]"), keyed: false)
        case UInt8(ascii: "\""): try string()
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try number()
        default: throw .syntax(offset: i, expected: "a value")
        }
    }

    private mutating func container(close: UInt8, keyed: Bool) throws(Failure) {
        depth += 1
        guard depth <= JSONCompactor.maxDepth else { throw .tooDeep(limit: JSONCompactor.maxDepth) }
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
                try string()
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

    private mutating func number() throws(Failure) {
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

    private mutating func string() throws(Failure) {
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
