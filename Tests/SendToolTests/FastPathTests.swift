import Foundation
import Testing
@testable import apns_send

/// The word-at-a-time paths of apns-send against the byte-at-a-time rules they stand
/// for: the same values, whatever the bytes and wherever they sit in the line.
@Suite struct FastPathTests {
    /// Lines of every length up to 80, with upper case, the bytes around 'A' and 'Z'
    /// and bytes above 0x7F: the fingerprint over the line as read equals the byte-wise
    /// one over its lower-cased bytes, and the seeded hash alone (the Bloom filter's)
    /// equals its second half.
    @Test func fingerprintOfALineIsThatOfItsLowerCasedBytes() {
        var rng = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = Array("0123456789abcdefABCDEF@[`{ \t#".utf8) + [0x40, 0x41, 0x5A, 0x5B, 0xC1, 0xDA, 0xFF, 0x00]
        for length in 0...80 {
            for _ in 0..<20 {
                let line = (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
                let seed: UInt64 = rng.next()
                let lowered = line.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }
                let fast = line.withUnsafeBufferPointer { TokenFingerprint(lowercasing: $0, seed: seed) }
                #expect(fast == TokenFingerprint(lowered, seed: seed), "line \(line)")
                #expect(line.withUnsafeBufferPointer { TokenFingerprint.seededHash(lowercasing: $0, seed: seed) } == fast.b,
                        "line \(line)")
            }
        }
    }

    /// The second read of a token file skips a line whose quick key no deferred line has:
    /// the key must be the same for every spelling of a token, whatever its length.
    @Test func quickKeyOfALineIsThatOfItsLowerCasedBytes() {
        var rng = SystemRandomNumberGenerator()
        let alphabet: [UInt8] = Array("0123456789abcdefABCDEF@[`{".utf8) + [0x40, 0x41, 0x5A, 0x5B, 0xC1, 0xDA, 0xFF, 0x00]
        for length in 0...80 {
            for _ in 0..<20 {
                let line = (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
                let lowered = line.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 32 : $0 }
                let key = line.withUnsafeBufferPointer { TokenFingerprint.quickKey(lowercasing: $0) }
                #expect(key == lowered.withUnsafeBufferPointer { TokenFingerprint.quickKey(lowercasing: $0) }, "line \(line)")
            }
        }
    }

    /// A quote, a backslash or a control character at any place of a string (the
    /// 8-byte test's every lane, and its tail) is escaped; other bytes are copied.
    @Test func everyCharacterThatNeedsEscapingIsEscapedWhereverItIs() throws {
        let specials: [Character] = ["\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}"]
        for length in 1...20 {
            for at in 0..<length {
                for special in specials + ["x", " ", "~", "é"] {
                    var chars = Array(repeating: Character("a"), count: length)
                    chars[at] = special
                    let s = String(chars)
                    var out: [UInt8] = []
                    Record.jsonString(s, to: &out)
                    let decoded = try JSONSerialization.jsonObject(with: Data(out), options: .fragmentsAllowed) as? String
                    #expect(decoded == s)
                    let plain = !specials.contains(special)
                    #expect((out.count == s.utf8.count + 2) == plain, "\(s.debugDescription) as \(String(decoding: out, as: UTF8.self))")
                }
            }
        }
    }
}
