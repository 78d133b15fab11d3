/// Deterministic, distinct, well-formed device tokens (64 lower-case hex digits):
/// the same `seed` gives the same tokens in every run, so a failure can be replayed.
public func deterministicTokens(_ count: Int, seed: Int = 0) -> [String] {
    (0..<count).map { i in
        var x = UInt64(truncatingIfNeeded: (seed &* 1_000_003) &+ i &+ 1) &* 0x9E37_79B9_7F4A_7C15
        return (0..<4).map { _ -> String in
            x ^= x >> 31
            x &*= 0xBF58_476D_1CE4_E5B9
            x ^= x >> 29
            return hexDigits(x, count: 16)
        }.joined()
    }
}

/// `x` in lower-case hex, zero-padded to `count` digits. Not `String(format:)`: that goes
/// through CoreFoundation, and in the suite's loops of thousands of tokens it cost seconds
/// of a test thread.
public func hexDigits(_ x: UInt64, count: Int) -> String {
    let hex = String(x, radix: 16)
    return String(repeating: "0", count: max(0, count - hex.count)) + hex
}
