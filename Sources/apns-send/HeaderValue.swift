/// Values that become HTTP/2 header values (apns-topic, apns-collapse-id,
/// apns-push-type) must not carry a control character: a CR or LF would be a
/// header injection on any HTTP/1 hop and is refused by HTTP/2 stacks.
enum HeaderValue {
    /// The first control character (below 0x20, or 0x7f) in `value`, if any.
    static func controlCharacter(in value: String) -> UInt8? {
        value.utf8.first { $0 < 0x20 || $0 == 0x7F }
    }

    /// "0x0d (CR)": how an error names the character, never echoing it.
    static func describe(_ c: UInt8) -> String {
        let hex = "0123456789abcdef".map { $0 }
        let name: String? = switch c {
        case 0x09: "tab"
        case 0x0A: "LF"
        case 0x0D: "CR"
        case 0x00: "NUL"
        case 0x1B: "ESC"
        case 0x7F: "DEL"
        default: nil
        }
        return "0x\(hex[Int(c >> 4)])\(hex[Int(c & 0xF)])" + (name.map { " (\($0))" } ?? "")
    }
}
