/// One record read back from a results file (for `--resume`): the fields that say
/// whether its token is settled. Reads what `Record` writes, and any flat JSON
/// object or RFC 4180 row with the same fields.
struct RecordLine {
    /// As written (unescaped bytes): lines that are not tokens can be any text.
    let token: [UInt8]
    let status: Int
    let reason: [UInt8]?

    private static let badDeviceToken = Array("BadDeviceToken".utf8)
    private static let notForTopic = Array("DeviceTokenNotForTopic".utf8)

    /// Delivered, or refused because of the token itself: see `ResumedResults`.
    var settlesToken: Bool {
        switch status {
        case 200, 410: true
        case 400: reason == RecordLine.badDeviceToken || reason == RecordLine.notForTopic
        case 0: reason == RecordLine.badDeviceToken
        default: false
        }
    }

    private static let tokenKey = Array("token".utf8), statusKey = Array("status".utf8)
    private static let reasonKey = Array("reason".utf8)

    /// `{"token":"…","status":N,"reason":"…"|null,…}`; other keys are skipped.
    static func json(_ line: [UInt8]) -> RecordLine? {
        var p = JSONScanner(line)
        var token: [UInt8]?, status: Int?, reason: [UInt8]?
        guard p.take(UInt8(ascii: "{")) else { return nil }
        repeat {
            guard let key = p.string(), p.take(UInt8(ascii: ":")) else { return nil }
            switch key {
            case tokenKey: token = p.string()
            case statusKey: status = p.integer()
            case reasonKey:
                if !p.null() {
                    reason = p.string()
                    if reason == nil { return nil }
                }
            default: guard p.skipValue() else { return nil }
            }
        } while p.take(UInt8(ascii: ","))
        guard p.take(UInt8(ascii: "}")), p.atEnd, let token, let status else { return nil }
        return RecordLine(token: token, status: status, reason: reason)
    }

    /// `token,status,apns_id,reason,timestamp,attempts` (the header is checked by the caller).
    static func csv(_ line: [UInt8]) -> RecordLine? {
        guard let fields = csvFields(line), fields.count == OutputFormat.columns.count,
              let status = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        return RecordLine(token: fields[0], status: status, reason: fields[3].isEmpty ? nil : fields[3])
    }

    /// RFC 4180 fields: quoted ones may hold commas and doubled quotes.
    private static func csvFields(_ line: [UInt8]) -> [[UInt8]]? {
        var fields: [[UInt8]] = [], field: [UInt8] = []
        var i = 0, quoted = false
        while i < line.count {
            let c = line[i]
            if quoted {
                if c == UInt8(ascii: "\"") {
                    if i + 1 < line.count && line[i + 1] == UInt8(ascii: "\"") { field.append(c); i += 1 } else { quoted = false }
                } else {
                    field.append(c)
                }
            } else if c == UInt8(ascii: "\"") && field.isEmpty {
                quoted = true
            } else if c == UInt8(ascii: ",") {
                fields.append(field)
                field = []
            } else {
                field.append(c)
            }
            i += 1
        }
        guard !quoted else { return nil }
        fields.append(field)
        return fields
    }
}

/// Just enough JSON to read a flat record: strings (with escapes), integers,
/// null, and any value skipped.
private struct JSONScanner {
    private let bytes: [UInt8]
    private var i = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var atEnd: Bool {
        mutating get { skipSpace(); return i == bytes.count }
    }

    mutating func take(_ c: UInt8) -> Bool {
        skipSpace()
        guard i < bytes.count, bytes[i] == c else { return false }
        i += 1
        return true
    }

    mutating func null() -> Bool { word("null") }

    mutating func integer() -> Int? {
        skipSpace()
        let start = i
        if i < bytes.count && bytes[i] == UInt8(ascii: "-") { i += 1 }
        while i < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[i]) { i += 1 }
        return Int(String(decoding: bytes[start..<i], as: UTF8.self))
    }

    /// A string's bytes, unescaped; the common case (no escapes) is one copy.
    mutating func string() -> [UInt8]? {
        guard take(UInt8(ascii: "\"")) else { return nil }
        let start = i
        while i < bytes.count, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\") { i += 1 }
        var out = Array(bytes[start..<min(i, bytes.count)])
        while i < bytes.count {
            let c = bytes[i]
            i += 1
            switch c {
            case UInt8(ascii: "\""): return out
            case UInt8(ascii: "\\"):
                guard i < bytes.count, let unescaped = unescape() else { return nil }
                out.append(contentsOf: unescaped)
            default: out.append(c)
            }
        }
        return nil
    }

    /// After a backslash: the bytes it stands for.
    private mutating func unescape() -> [UInt8]? {
        let e = bytes[i]
        i += 1
        switch e {
        case UInt8(ascii: "n"): return [0x0A]
        case UInt8(ascii: "r"): return [0x0D]
        case UInt8(ascii: "t"): return [0x09]
        case UInt8(ascii: "b"): return [0x08]
        case UInt8(ascii: "f"): return [0x0C]
        case UInt8(ascii: "u"):
            guard i + 4 <= bytes.count, let u = UInt32(String(decoding: bytes[i..<i + 4], as: UTF8.self), radix: 16),
                  let scalar = Unicode.Scalar(u) else { return nil }
            i += 4
            return Array(String(Character(scalar)).utf8)
        default: return [e]
        }
    }

    /// Any scalar value (the records have no nested ones).
    mutating func skipValue() -> Bool {
        skipSpace()
        guard i < bytes.count else { return false }
        switch bytes[i] {
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "n"): return word("null")
        case UInt8(ascii: "t"): return word("true")
        case UInt8(ascii: "f"): return word("false")
        default:
            let start = i
            while i < bytes.count, "-+.eE0123456789".utf8.contains(bytes[i]) { i += 1 }
            return i > start
        }
    }

    private mutating func word(_ w: String) -> Bool {
        skipSpace()
        let w = Array(w.utf8)
        guard i + w.count <= bytes.count, Array(bytes[i..<i + w.count]) == w else { return false }
        i += w.count
        return true
    }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 { i += 1 }
    }
}
