/// What the first read of a token line decides about it.
enum FirstSight {
    case send
    /// An earlier line had the same token.
    case duplicate
    /// The resumed results file already holds a final record for it.
    case settled
    /// Maybe seen: decided exactly by a second read of the file (`ProbableMemory`).
    case deferred
}

/// How the token lines already read are remembered: the part of apns-send whose
/// memory would otherwise grow with the file.
protocol TokenMemory: AnyObject {
    /// A token the resumed results file settled; its lines are skipped.
    func settle(_ f: TokenFingerprint)
    /// The first read of the token line numbered `number` (token lines counted from
    /// 0): `line` is its trimmed bytes as read, fingerprinted lower-cased with `seed`.
    func firstSight(_ line: UnsafeBufferPointer<UInt8>, seed: UInt64, number: Int) -> FirstSight
}

/// For a token file that can be read only once (a pipe): every fingerprint kept,
/// 16 bytes a token (about twice that with the hash table's room).
final class ExactMemory: TokenMemory {
    private var seen = Set<TokenFingerprint>()
    private var settled = Set<TokenFingerprint>()

    func settle(_ f: TokenFingerprint) {
        settled.insert(f)
    }

    func firstSight(_ line: UnsafeBufferPointer<UInt8>, seed: UInt64, number: Int) -> FirstSight {
        let f = TokenFingerprint(lowercasing: line, seed: seed)
        guard seen.insert(f).inserted else { return .duplicate }
        return settled.contains(f) ? .settled : .send
    }
}

/// For a regular file: a Bloom filter sized from the file (2 bytes a token) answers
/// "new" for almost every line at once. The few "maybe seen" lines are deferred
/// and settled exactly at the end by reading the file again: a deferred line is a
/// duplicate when an earlier line has its fingerprint, otherwise it is new. So
/// memory stays flat with the file's length while the answer stays exact (to the
/// fingerprint's 128 bits).
///
/// Tokens settled by a resumed results file are kept exactly (16 bytes each, about
/// twice that with the table's room): putting them in the filter would defer every
/// one of their lines and read the results file twice.
final class ProbableMemory: TokenMemory {
    private struct Candidate {
        let line: Int
        let quickKey: UInt64
        var earlier = false
    }

    private let filter: BloomFilter
    // Read for every line of a read, like `candidateBits` and `candidateMask`: unchecked
    // for exclusivity at run time (a checked access costs more than the read), which
    // is sound since one thread reads the file and no access to them overlaps another.
    @exclusivity(unchecked) private var settled = Set<TokenFingerprint>()
    /// One entry per distinct deferred token: its first line. A later line with the
    /// same fingerprint is a duplicate at once.
    private var candidates: [TokenFingerprint: Candidate] = [:]
    /// The last line the second read must reach.
    private(set) var lastDeferredLine = -1
    /// For the second read: one bit per slot of the candidates' quick keys, about 16
    /// bits a candidate, made when it starts (the first read, which adds candidates,
    /// is over by then). Almost every line of that read is no candidate, and a clear
    /// bit says so before the line's fingerprint is computed.
    @exclusivity(unchecked) private var candidateBits: [UInt64] = []
    @exclusivity(unchecked) private var candidateMask: UInt64 = 0

    /// Lines deferred to the second read.
    private(set) var deferred = 0

    init(expectedTokens: Int, bitsPerToken: Int) {
        filter = BloomFilter(expected: expectedTokens, bitsPerToken: bitsPerToken)
    }

    var hasDeferred: Bool { lastDeferredLine >= 0 }

    func settle(_ f: TokenFingerprint) {
        settled.insert(f)
    }

    /// Most lines are new to the filter, which needs one 64-bit hash: the whole
    /// fingerprint is made only for a resumed run's lookup and for a maybe-seen line.
    func firstSight(_ line: UnsafeBufferPointer<UInt8>, seed: UInt64, number: Int) -> FirstSight {
        if filter.insert(TokenFingerprint.seededHash(lowercasing: line, seed: seed)) {
            if settled.isEmpty { return .send }
            return settled.contains(TokenFingerprint(lowercasing: line, seed: seed)) ? .settled : .send
        }
        let f = TokenFingerprint(lowercasing: line, seed: seed)
        if candidates[f] != nil { return .duplicate }
        candidates[f] = Candidate(line: number, quickKey: TokenFingerprint.quickKey(lowercasing: line))
        lastDeferredLine = number
        deferred += 1
        return .deferred
    }

    /// Second read of the token file, in order: the verdict for the deferred line
    /// `line`, nil for any other line. Every earlier line has been rechecked by the
    /// time a deferred line comes, so its verdict is final.
    func recheck(_ f: TokenFingerprint, line: Int) -> FirstSight? {
        guard let c = candidates[f] else { return nil }
        if line < c.line {
            candidates[f]!.earlier = true
            return nil
        }
        guard line == c.line else { return nil }
        candidates[f] = nil
        return c.earlier ? .duplicate : settled.contains(f) ? .settled : .send
    }

    /// Second read: false when no deferred line has this quick key, so the line is no
    /// candidate and needs no `recheck`.
    func mayBeCandidate(quickKey: UInt64) -> Bool {
        if candidateBits.isEmpty { makeCandidateBits() }
        let slot = quickKey & candidateMask
        return candidateBits[Int(slot >> 6)] & (1 << (slot & 63)) != 0
    }

    private func makeCandidateBits() {
        var bits = 64
        while bits < candidates.count * 16 { bits *= 2 }
        candidateMask = UInt64(bits - 1)
        candidateBits = [UInt64](repeating: 0, count: bits / 64)
        for c in candidates.values {
            let slot = c.quickKey & candidateMask
            candidateBits[Int(slot >> 6)] |= 1 << (slot & 63)
        }
    }
}
