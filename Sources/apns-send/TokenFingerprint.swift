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
