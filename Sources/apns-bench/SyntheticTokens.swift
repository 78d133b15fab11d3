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

    private static let prefix = String(repeating: "ab", count: 24)

    /// The token number `index` (from 1) of every sequence.
    static func token(_ index: UInt64) -> String {
        let digits = String(index, radix: 16)
        return prefix + String(repeating: "0", count: 16 - digits.count) + digits
    }
}
