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
            while let read = TokenLines.withNextTokenLine(reader, { line -> String? in
                let sight = memory.firstSight(line, seed: seed, number: tokenLines)
                tokenLines += 1
                return count(sight) ? String(decoding: line, as: UTF8.self) : nil
            }) {
                if let token = read { return token }
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
        // Every line of the file up to the last deferred one comes through here: the
        // reader, the line number and the bound are kept in locals, not read from
        // properties (and retained) line by line.
        let reader = rescan!, last = memory.lastDeferredLine
        var number = rescanLine
        defer { rescanLine = number }
        while number <= last, let read = TokenLines.withNextTokenLine(reader, { line -> String? in
            defer { number += 1 }
            guard memory.mayBeCandidate(quickKey: TokenFingerprint.quickKey(lowercasing: line)),
                  let verdict = memory.recheck(TokenFingerprint(lowercasing: line, seed: seed), line: number),
                  count(verdict) else { return nil }
            return String(decoding: line, as: UTF8.self)
        }) {
            if let token = read { return token }
        }
        if number <= last {
            failure = reader.failure ?? "it changed while being sent (shorter on the second read)"
        }
        return nil
    }

    private func fingerprint(_ line: ArraySlice<UInt8>) -> TokenFingerprint {
        line.withUnsafeBufferPointer { TokenFingerprint(lowercasing: $0, seed: seed) }
    }

    /// `body`'s value for the next line that is neither blank nor a comment, trimmed
    /// (seen in the reader's buffer, not copied); nil at the end.
    private static func withNextTokenLine<R>(_ reader: LineReader, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        while let read = reader.withNextLine({ raw -> R? in
            let line = trimmed(raw)
            guard let first = line.first, first != UInt8(ascii: "#") else { return nil }
            return body(line)
        }) {
            if let value = read { return value }
        }
        return nil
    }

    static func trimmed(_ line: [UInt8]) -> ArraySlice<UInt8> {
        var s = line[...]
        while let c = s.first, isSpace(c) { s.removeFirst() }
        while let c = s.last, isSpace(c) { s.removeLast() }
        return s
    }

    static func trimmed(_ line: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var from = 0, to = line.count
        while from < to, isSpace(line[from]) { from += 1 }
        while to > from, isSpace(line[to - 1]) { to -= 1 }
        return UnsafeBufferPointer(rebasing: line[from..<to])
    }

    /// Spaces, tabs and the "\r" of CRLF files.
    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r")
    }
}
