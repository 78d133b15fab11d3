/// N distinct 64-hex-digit device tokens made on the fly: a fixed prefix and the
/// index in hex, so memory stays flat however many are sent.
struct SyntheticTokens: Sequence {
    let count: Int

    func makeIterator() -> Iterator { Iterator(remaining: count) }

    struct Iterator: IteratorProtocol {
        var remaining: Int
        var index: UInt64 = 0

        mutating func next() -> String? {
            guard remaining > 0 else { return nil }
            remaining -= 1
            index += 1
            return SyntheticTokens.token(index)
        }
    }

    /// The token number `index` (from 1) of every sequence: "ab" 24 times, then the
    /// index in 16 hex digits. Written into the string's own storage in one pass: the
    /// benchmark makes one per send, and three concatenated strings a token were a
    /// visible share of the client's CPU in the per-event rows.
    static func token(_ index: UInt64) -> String {
        String(unsafeUninitializedCapacity: 64) { out in
            for k in stride(from: 0, to: 48, by: 2) {
                out[k] = UInt8(ascii: "a")
                out[k + 1] = UInt8(ascii: "b")
            }
            let hex: StaticString = "0123456789abcdef"
            for k in 0..<16 {
                out[48 + k] = hex.utf8Start[Int((index >> UInt64(60 - 4 * k)) & 0xF)]
            }
            return 64
        }
    }
}
