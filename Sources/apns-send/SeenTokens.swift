/// The token lines already seen, kept compact: a 128-bit fingerprint per distinct
/// normalized token instead of the string, so millions of tokens fit in tens of
/// megabytes.
///
/// Two fingerprints collide only when both 64-bit hashes collide: for n distinct
/// tokens the chance that any one is wrongly taken for a duplicate (and silently
/// not sent) is about n²/2^129, under 10^-25 for ten million tokens.
struct SeenTokens {
    private struct Fingerprint: Hashable {
        let a: UInt64
        let b: UInt64

        func hash(into hasher: inout Hasher) {
            hasher.combine(a)
        }
    }

    private var seen = Set<Fingerprint>()
    /// Mixed into the second hash, so that no fixed input can be built to collide.
    private let seed: UInt64 = .random(in: .min ... .max)

    var count: Int { seen.count }

    /// Records `token` (already normalized); true when it was new.
    mutating func insert(_ token: some Collection<UInt8>) -> Bool {
        seen.insert(Fingerprint(a: SeenTokens.fnv1a64(token), b: seeded64(token))).inserted
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

    /// A multiply-xorshift hash over 8-byte words, seeded, with a final avalanche
    /// (MurmurHash3's fmix64): independent of FNV-1a's arithmetic.
    private func seeded64(_ bytes: some Collection<UInt8>) -> UInt64 {
        var h = seed ^ (UInt64(bytes.count) &* 0x9e37_79b9_7f4a_7c15)
        var word: UInt64 = 0
        var filled = 0
        for byte in bytes {
            word |= UInt64(byte) << (8 * UInt64(filled))
            filled += 1
            if filled == 8 {
                h = SeenTokens.mix(h ^ word)
                word = 0
                filled = 0
            }
        }
        if filled > 0 { h = SeenTokens.mix(h ^ word) }
        return SeenTokens.fmix64(h)
    }

    private static func mix(_ x: UInt64) -> UInt64 {
        var h = x &* 0xff51_afd7_ed55_8ccd
        h ^= h >> 29
        return h &* 0xc4ce_b9fe_1a85_ec53
    }

    private static func fmix64(_ x: UInt64) -> UInt64 {
        var h = x
        h ^= h >> 33
        h &*= 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h &*= 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }
}
