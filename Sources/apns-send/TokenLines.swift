/// The token lines of tokens.txt as the library is fed them: trimmed, without
/// blank lines and `#` comments, each distinct token once (duplicates compared
/// lower-case, so "AB.." and "ab.." are one token; a later duplicate gets no record),
/// and none that a resumed results file already settled.
///
/// Lines are passed on as trimmed text, not parsed: the library turns a line that
/// is not a device token into its status 0 / BadDeviceToken record.
///
/// A regular file is read twice when needed: lines the Bloom filter could not tell
/// apart from earlier ones are sent after the first read, once a second read has
/// settled them (`ProbableMemory`). Memory then stays flat with the file's length.
final class TokenLines: Sequence, IteratorProtocol {
    /// The first read; the progress bar follows it.
    let reader: LineReader
    private let path: String
    private let memory: TokenMemory
    private let seed: UInt64 = .random(in: .min ... .max)
    /// The second read, once the first reached the end with lines deferred.
    private var rescan: LineReader?
    private var rescanLine = 0
    /// The first token line, read ahead by `hasTokenLines`.
    private var pending: String?
    /// Token lines read by the first read (every one, whatever became of it).
    private(set) var tokenLines = 0
    private(set) var duplicates = 0
    private(set) var settled = 0
    /// Lines the Bloom filter could not tell from earlier ones, settled by the second read.
    var deferred: Int { (memory as? ProbableMemory)?.deferred ?? 0 }
    /// Why a read stopped early, if one did: later lines were not sent.
    private(set) var failure: String?

    /// Reads `resumed`'s settled tokens first, so that their lines are skipped.
    /// `bitsPerToken` sizes the Bloom filter (tests shrink it to force deferrals).
    init(path: String, resumed: ResumedResults?, bitsPerToken: Int = 16) throws(UsageError) {
        do { reader = try LineReader(path: path) } catch { throw UsageError(path, error.reason) }
        self.path = path
        if let size = reader.size {
            // 65 bytes is the shortest usual line (64 hex digits and "\n").
            memory = ProbableMemory(expectedTokens: size / 65 + 1024, bitsPerToken: bitsPerToken)
        } else {
            memory = ExactMemory()
        }
        try resumed?.forEachSettled { token in memory.settle(fingerprint(token)) }
    }

    /// False when the file holds no token line at all (reads up to the first one).
    func hasTokenLines() -> Bool {
        if pending == nil { pending = next() }
        return tokenLines > 0
    }

    func next() -> String? {
        if let line = pending {
            pending = nil
            return line
        }
        if rescan == nil {
            while let line = TokenLines.nextTokenLine(reader) {
                let sight = memory.firstSight(fingerprint(line), line: tokenLines)
                tokenLines += 1
                if count(sight) { return String(decoding: line, as: UTF8.self) }
            }
            if let error = reader.failure { failure = error }
        }
        return nextDeferred()
    }

    /// After an interruption: how many distinct token lines were never handed out.
    func countRemaining() -> Int {
        var n = 0
        while next() != nil { n += 1 }
        return n
    }

    /// Counts a skipped line; true when the line is to be sent.
    private func count(_ sight: FirstSight) -> Bool {
        switch sight {
        case .send: return true
        case .duplicate: duplicates += 1
        case .settled: settled += 1
        case .deferred: break
        }
        return false
    }

    /// The second read: deferred lines in file order, each with its exact verdict.
    private func nextDeferred() -> String? {
        guard let memory = memory as? ProbableMemory, memory.hasDeferred, failure == nil else { return nil }
        if rescan == nil {
            do {
                rescan = try LineReader(path: path)
            } catch {
                failure = "cannot read it again to settle possible duplicates: \(error.reason)"
                return nil
            }
        }
        while rescanLine <= memory.lastDeferredLine, let line = TokenLines.nextTokenLine(rescan!) {
            defer { rescanLine += 1 }
            if let verdict = memory.recheck(fingerprint(line), line: rescanLine), count(verdict) {
                return String(decoding: line, as: UTF8.self)
            }
        }
        if rescanLine <= memory.lastDeferredLine {
            failure = rescan!.failure ?? "it changed while being sent (shorter on the second read)"
        }
        return nil
    }

    private func fingerprint(_ line: some Collection<UInt8>) -> TokenFingerprint {
        TokenFingerprint(line.lazy.map(TokenLines.lowercased), seed: seed)
    }

    /// The next line that is neither blank nor a comment, trimmed.
    private static func nextTokenLine(_ reader: LineReader) -> ArraySlice<UInt8>? {
        while let raw = reader.nextLine() {
            let line = trimmed(raw)
            if !line.isEmpty && line.first != UInt8(ascii: "#") { return line }
        }
        return nil
    }

    static func trimmed(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var s = line[...]
        while let c = s.first, isSpace(c) { s.removeFirst() }
        while let c = s.last, isSpace(c) { s.removeLast() }
        return s
    }

    /// Spaces, tabs and the "\r" of CRLF files.
    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r")
    }

    static func lowercased(_ c: UInt8) -> UInt8 {
        c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 32 : c
    }
}
