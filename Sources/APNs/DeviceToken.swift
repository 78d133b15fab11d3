/// A device token as APNs wants it in the path: lower-case hex, 64 to 200 digits,
/// an even count (64 today; Apple warns the length may change).
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    /// How many hex digits a token may have.
    public static let lengthRange = 64...200

    /// Lower-case hex digits.
    public let hex: String

    /// Accepts surrounding white space and upper-case hex; nil for anything else.
    public init?(_ text: some StringProtocol) {
        // Most tokens arrive as APNs wants them (a backend stores what the app sent):
        // then the caller's own string is kept, with no copy.
        var string = String(text)
        if string.withUTF8(DeviceToken.isCanonical) {
            hex = string
            return
        }
        var utf8 = Array(text.utf8)
        while let last = utf8.last, DeviceToken.isSpace(last) { utf8.removeLast() }
        let start = utf8.firstIndex { !DeviceToken.isSpace($0) } ?? utf8.endIndex
        utf8.removeFirst(start)
        guard DeviceToken.lengthRange.contains(utf8.count), utf8.count % 2 == 0 else { return nil }
        for i in utf8.indices {
            switch utf8[i] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): break
            case UInt8(ascii: "A")...UInt8(ascii: "F"): utf8[i] += 32
            default: return nil
            }
        }
        hex = String(decoding: utf8, as: UTF8.self)
    }

    /// The lower-case hex digits.
    public var description: String { hex }


    /// `DeviceToken(text)?.hex`, without the generic conversion and the wrapper: a
    /// batch checks every token it sends here, and most are already canonical, so
    /// then `text` itself is returned.
    static func hex(of text: String) -> String? {
        var string = text
        if string.withUTF8(isCanonical) { return string }
        return DeviceToken(text)?.hex
    }

    /// Lower-case hex of a valid length; tested 8 bytes a step, since every token a
    /// batch sends goes through here.
    private static func isCanonical(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lengthRange.contains(utf8.count), utf8.count % 2 == 0 else { return false }
        let raw = UnsafeRawBufferPointer(utf8)
        var i = 0
        // Every word's verdict gathered, one test: tokens as APNs wants them are the rule.
        var bad: UInt64 = 0
        while utf8.count - i >= 8 {
            bad |= nonHexBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            i += 8
        }
        guard bad == 0 else { return false }
        for c in utf8[i...] where !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) { return false }
        return true
    }

    /// Zero when each of the 8 bytes is 0-9 or a-f; otherwise the high bit of each byte
    /// that is not is set. For a byte x below 0x80, x + (0x80 - lo) has its high bit
    /// set when x >= lo, and x + (0x7F - hi) has it clear when x <= hi; no sum carries
    /// into the next byte. (One of 0x80 or more may spoil its neighbour's bit, but its
    /// own is set from `w`.)
    private static func nonHexBytes(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
        let digit = (w &+ ones &* (0x80 - 0x30)) & ~(w &+ ones &* (0x7F - 0x39))
        let letter = (w &+ ones &* (0x80 - 0x61)) & ~(w &+ ones &* (0x7F - 0x66))
        return (w | ~(digit | letter)) & high
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\n")
    }
}
