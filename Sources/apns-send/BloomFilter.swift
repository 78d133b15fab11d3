/// A blocked Bloom filter over token hashes (`TokenFingerprint.seededHash`):
/// "certainly not seen" or "maybe seen", in a fixed number of bits chosen up front.
///
/// Each hash owns one 512-bit block (one cache line) and sets 7 bits in it,
/// so a lookup costs one cache miss. At 16 bits per token the false "maybe" rate is
/// about 0.1-0.2% (measured in `TokenLinesTests`); those lines are settled exactly later (`TokenLines`), so the
/// rate costs time, never correctness.
///
/// A class over a pointer, not a struct over an array: every token line of a file is
/// inserted, and each modification of a stored property (the array, or a struct
/// holding it) is checked for exclusivity at run time.
final class BloomFilter {
    private static let wordsPerBlock = 8
    /// 7 × 9 bits of the hash's 64.
    private static let bitsPerKey = 7
    private let words: UnsafeMutableBufferPointer<UInt64>
    private let blocks: UInt64

    /// Room for `expected` tokens at `bitsPerToken` bits each (at least one block).
    init(expected: Int, bitsPerToken: Int = 16) {
        let bits = max(1, expected) * bitsPerToken
        let blocks = max(1, (bits + 511) / 512)
        self.blocks = UInt64(blocks)
        words = .allocate(capacity: blocks * BloomFilter.wordsPerBlock)
        words.initialize(repeating: 0)
    }

    deinit { words.deallocate() }

    var byteCount: Int { words.count * 8 }

    /// Adds a token by its 64-bit hash (`TokenFingerprint.seededHash`); returns false
    /// when every one of its bits was already set ("maybe seen").
    func insert(_ hash: UInt64) -> Bool {
        let base = blockStart(hash)
        var bits = hash
        var added = false
        for _ in 0..<BloomFilter.bitsPerKey {
            // 9 bits pick one of the block's 512: 3 for the word, 6 for the bit.
            let word = base + Int(bits & 7), mask = UInt64(1) << ((bits >> 3) & 63)
            if words[word] & mask == 0 {
                words[word] |= mask
                added = true
            }
            bits >>= 9
        }
        return added
    }

    /// The block from the hash mixed again (its low 63 bits pick the bits), mapped
    /// onto the block count by a multiply-shift (no power-of-two sizing needed).
    private func blockStart(_ hash: UInt64) -> Int {
        let h = TokenFingerprint.fmix64(hash ^ 0x9e37_79b9_7f4a_7c15)
        return Int(h.multipliedFullWidth(by: blocks).high) * BloomFilter.wordsPerBlock
    }
}
