/// A normalized token line reduced to 128 bits: two independent 64-bit hashes.
///
/// Two lines are taken for one token when both hashes agree. For n distinct tokens
/// the chance that any one is wrongly taken for a duplicate (and not sent) is about
/// n²/2^129, under 10^-25 for ten million tokens. The second hash is seeded per
/// run, so no fixed input can be built to collide.
struct TokenFingerprint: Hashable {
    let a: UInt64
    let b: UInt64

    /// `token` is already normalized (trimmed, lower-case). Both hashes take the bytes
    /// 8 at a time, as little-endian words, the last one padded with zeros (the length,
    /// mixed in first, tells "ab" from "ab\0").
    init(_ token: some Collection<UInt8>, seed: UInt64) {
        var a = TokenFingerprint.startA(token.count), b = TokenFingerprint.startB(token.count, seed: seed)
        var word: UInt64 = 0
        var filled: UInt64 = 0
        for byte in token {
            word |= UInt64(byte) << (8 * filled)
            filled += 1
            if filled == 8 {
                a = TokenFingerprint.roundA(a, word)
                b = TokenFingerprint.mix(b ^ word)
                word = 0
                filled = 0
            }
        }
        if filled > 0 {
            a = TokenFingerprint.roundA(a, word)
            b = TokenFingerprint.mix(b ^ word)
        }
        self.a = TokenFingerprint.finishA(a)
        self.b = TokenFingerprint.fmix64(b)
    }

    /// The same value as `init(_:seed:)` over `bytes` with A-Z lower-cased, in one
    /// pass over 8-byte words: every token line of a file is hashed once or twice
    /// (`TokenLines`), so this is the per-line cost of reading tokens.
    init(lowercasing bytes: UnsafeBufferPointer<UInt8>, seed: UInt64) {
        var a = TokenFingerprint.startA(bytes.count), b = TokenFingerprint.startB(bytes.count, seed: seed)
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while bytes.count - i >= 8 {
            let word = TokenFingerprint.lowercased(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            a = TokenFingerprint.roundA(a, word)
            b = TokenFingerprint.mix(b ^ word)
            i += 8
        }
        if i < bytes.count {
            var word: UInt64 = 0
            for k in 0..<(bytes.count - i) { word |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            word = TokenFingerprint.lowercased(word)
            a = TokenFingerprint.roundA(a, word)
            b = TokenFingerprint.mix(b ^ word)
        }
        self.a = TokenFingerprint.finishA(a)
        self.b = TokenFingerprint.fmix64(b)
    }

    /// `TokenFingerprint(lowercasing: bytes, seed: seed).b` alone, at about half the
    /// cost: what the Bloom filter of the first read needs for most lines.
    static func seededHash(lowercasing bytes: UnsafeBufferPointer<UInt8>, seed: UInt64) -> UInt64 {
        var b = startB(bytes.count, seed: seed)
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while bytes.count - i >= 8 {
            b = mix(b ^ lowercased(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))))
            i += 8
        }
        if i < bytes.count {
            var word: UInt64 = 0
            for k in 0..<(bytes.count - i) { word |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            b = mix(b ^ lowercased(word))
        }
        return fmix64(b)
    }

    /// A cheap stand-in for the line's fingerprint, the same for any two lines with the
    /// same fingerprint: the length and the last 8 bytes (A-Z lower-cased), mixed. The
    /// second read of a token file computes it for every line and the fingerprint only
    /// for the few whose key a deferred line has.
    static func quickKey(lowercasing bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var word: UInt64 = 0
        if bytes.count >= 8 {
            word = UInt64(littleEndian: UnsafeRawBufferPointer(bytes).loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
        } else {
            for k in 0..<bytes.count { word |= UInt64(bytes[k]) << (8 * UInt64(k)) }
        }
        return fmix64(lowercased(word) ^ (UInt64(bytes.count) &* 0x9e37_79b9_7f4a_7c15))
    }

    // The first hash: xxHash64's steps for its last words and its avalanche (its
    // primes), unseeded. The second: a multiply-xorshift over the words, seeded,
    // with MurmurHash3's fmix64 at the end. Different arithmetic, so independent.
    private static let p1: UInt64 = 0x9e37_79b1_85eb_ca87, p2: UInt64 = 0xc2b2_ae3d_27d4_eb4f
    private static let p3: UInt64 = 0x1656_67b1_9e37_79f9, p4: UInt64 = 0x85eb_ca77_c2b2_ae63
    private static let p5: UInt64 = 0x27d4_eb2f_1656_67c5

    @inline(__always)
    private static func startA(_ count: Int) -> UInt64 { p5 &+ UInt64(count) }

    @inline(__always)
    private static func startB(_ count: Int, seed: UInt64) -> UInt64 { seed ^ (UInt64(count) &* 0x9e37_79b9_7f4a_7c15) }

    @inline(__always)
    private static func roundA(_ h: UInt64, _ word: UInt64) -> UInt64 {
        let k = rotl(word &* p2, 31) &* p1
        return rotl(h ^ k, 27) &* p1 &+ p4
    }

    @inline(__always)
    private static func finishA(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h &*= p2
        h ^= h >> 29
        h &*= p3
        h ^= h >> 32
        return h
    }

    @inline(__always)
    private static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    /// A-Z to a-z in each of the word's 8 bytes, other bytes as they are: a byte gets
    /// 0x20 added when its high bit is clear and its low 7 bits are 0x41...0x5A.
    @inline(__always)
    private static func lowercased(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
        let low7 = w & ~high
        let atLeastA = low7 &+ ones &* (0x80 - 0x41)   // high bit set where low7 >= 0x41
        let pastZ = low7 &+ ones &* (0x80 - 0x5B)      // high bit set where low7 >= 0x5B
        let upper = atLeastA & ~pastZ & ~w & high
        return w | (upper >> 2)
    }

    /// Both halves are hashes already; one of them is enough for a hash table.
    func hash(into hasher: inout Hasher) {
        hasher.combine(a)
    }

    @inline(__always)
    private static func mix(_ x: UInt64) -> UInt64 {
        var h = x &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 29
        return h &* 0xc4ce_b9fe_1a85_ec53
    }

    static func fmix64(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h &*= 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h &*= 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }
}
