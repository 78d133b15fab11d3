/// A device token as APNs wants it in the path: lower-case hex, 64 to 200 digits,
/// an even count (64 today; Apple warns the length may change).
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
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

    public var description: String { hex }

    private static func isCanonical(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        guard lengthRange.contains(utf8.count), utf8.count % 2 == 0 else { return false }
        for c in utf8 where !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) { return false }
        return true
    }

    private static func isSpace(_ c: UInt8) -> Bool {
        c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") || c == UInt8(ascii: "\n")
    }
}
