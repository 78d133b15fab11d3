/// A normalized token line reduced to 128 bits: two independent 64-bit hashes.
///
/// Two lines are taken for one token when both hashes agree. For n distinct tokens
/// the chance that any one is wrongly taken for a duplicate (and not sent) is about
/// n²/2^129, under 10^-25 for ten million tokens. The second hash is seeded per
/// run, so no fixed input can be built to collide.
struct TokenFingerprint: Hashable {
    let a: UInt64
    let b: UInt64

    /// `token` is already normalized (trimmed, lower-case).
    init(_ token: some Collection<UInt8>, seed: UInt64) {
        a = TokenFingerprint.fnv1a64(token)
        b = TokenFingerprint.seeded64(token, seed: seed)
    }

    /// The same value as `init(_:seed:)` over `bytes` with A-Z lower-cased, in one
    /// pass over 8-byte words: every token line of a file is hashed once or twice
    /// (`TokenLines`), so this is the per-line cost of reading tokens.
    init(lowercasing bytes: UnsafeBufferPointer<UInt8>, seed: UInt64) {
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        var h = seed ^ (UInt64(bytes.count) &* 0x9e37_79b9_7f4a_7c15)
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while bytes.count - i >= 8 {
            let word = TokenFingerprint.lowercased(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            fnv = TokenFingerprint.fnv1a64(fnv, word, bytes: 8)
            h = TokenFingerprint.mix(h ^ word)
            i += 8
        }
        if i < bytes.count {
            var word: UInt64 = 0
            for k in 0..<(bytes.count - i) { word |= UInt64(bytes[i + k]) << (8 * UInt64(k)) }
            word = TokenFingerprint.lowercased(word)
            fnv = TokenFingerprint.fnv1a64(fnv, word, bytes: bytes.count - i)
            h = TokenFingerprint.mix(h ^ word)
        }
        a = fnv
        b = TokenFingerprint.fmix64(h)
    }

    /// FNV-1a continued over the first `bytes` bytes of `word`, lowest first.
    @inline(__always)
    private static func fnv1a64(_ start: UInt64, _ word: UInt64, bytes: Int) -> UInt64 {
        var h = start, w = word
        for _ in 0..<bytes {
            h = (h ^ (w & 0xFF)) &* 0x0000_0100_0000_01b3
            w >>= 8
        }
        return h
    }

    /// A-Z to a-z in each of the word's 8 bytes, other bytes as they are: a byte gets
    /// 0x20 added when its high bit is clear and its low 7 bits are 0x41...0x5A.
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

    /// FNV-1a, 64 bits.
    private static func fnv1a64(_ bytes: some Collection<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            h ^= UInt64(byte)
            h &*= 0x0000_0100_0000_01b3
        }
        return h
    }

    /// A multiply-xorshift hash over 8-byte words with a final avalanche
    /// (MurmurHash3's fmix64): independent of FNV-1a's arithmetic.
    private static func seeded64(_ bytes: some Collection<UInt8>, seed: UInt64) -> UInt64 {
        var h = seed ^ (UInt64(bytes.count) &* 0x9e37_79b9_7f4a_7c15)
        var word: UInt64 = 0
        var filled: UInt64 = 0
        for byte in bytes {
            word |= UInt64(byte) << (8 * filled)
            filled += 1
            if filled == 8 {
                h = mix(h ^ word)
                word = 0
                filled = 0
            }
        }
        if filled > 0 { h = mix(h ^ word) }
        return fmix64(h)
    }

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
