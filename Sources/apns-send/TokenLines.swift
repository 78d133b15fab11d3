/// The token lines of tokens.txt as the library is fed them: trimmed, without
/// blank lines and `#` comments, each distinct token once (duplicates compared
/// lower-case, so "AB.." and "ab.." are one token; a later duplicate gets no record).
///
/// Lines are passed on as trimmed text, not parsed: the library turns a line that
/// is not a device token into its status 0 / BadDeviceToken record.
final class TokenLines: Sequence, IteratorProtocol {
    let reader: LineReader
    private var seen = SeenTokens()
    /// The first token line, read ahead by `hasTokenLines`.
    private var pending: String?
    private(set) var duplicates = 0

    init(reader: LineReader) {
        self.reader = reader
    }

    /// False when the file holds no token line at all (reads up to the first one).
    func hasTokenLines() -> Bool {
        if pending == nil { pending = next() }
        return pending != nil
    }

    func next() -> String? {
        if let line = pending {
            pending = nil
            return line
        }
        while let raw = reader.nextLine() {
            let line = TokenLines.trimmed(raw)
            if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
            guard seen.insert(line.lazy.map(TokenLines.lowercased)) else {
                duplicates += 1
                continue
            }
            return String(decoding: line, as: UTF8.self)
        }
        return nil
    }

    /// After an interruption: how many distinct token lines were never handed out.
    func countRemaining() -> Int {
        var n = 0
        while next() != nil { n += 1 }
        return n
    }

    private static func trimmed(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var s = line[...]
        while let c = s.first, isSpace(c) { s.removeFirst() }
        while let c = s.last, isSpace(c) { s.removeLast() }
        return s
    }

    /// Spaces, tabs and the "\r" of CRLF files.
    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r")
    }

    private static func lowercased(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 32 : c
    }
}
