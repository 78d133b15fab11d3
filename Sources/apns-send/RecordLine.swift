import APNs

/// One record read back from a results file (for `--resume`): the fields that say
/// whether its token (or, for a `--messages` run, its line) is settled. Reads what
/// `Record` writes, and any flat JSON object or RFC 4180 row with the same fields.
struct RecordLine {
    /// As written (unescaped bytes): lines that are not tokens can be any text.
    let token: [UInt8]
    let status: Int
    let reason: [UInt8]?
    /// The messages file's line the record is for (`--messages` runs only).
    var line: Int? = nil

    private static let badDeviceToken = Array("BadDeviceToken".utf8)
    private static let notForTopic = Array("DeviceTokenNotForTopic".utf8)
    private static let invalidMessage = Array("InvalidMessage".utf8)
    private static let payloadTooLarge = Array("PayloadTooLarge".utf8)

    /// Delivered, or refused because of the token itself, or (status 0) refused
    /// before sending because of the input line itself (a malformed token; with
    /// `--messages` also an invalid line or an oversized payload): sending again
    /// could only repeat it. See `ResumedResults`.
    var settles: Bool {
        switch status {
        case 200, 410: true
        case 400: reason == RecordLine.badDeviceToken || reason == RecordLine.notForTopic
        case 0: reason == RecordLine.badDeviceToken || reason == RecordLine.invalidMessage
            || reason == RecordLine.payloadTooLarge
        default: false
        }
    }

    /// `{"token":"…","status":N,"reason":"…"|null,…,"line":N}`; other keys are skipped.
    static func json(_ line: [UInt8]) -> RecordLine? {
        var token: [UInt8]?, status: Int?, reason: [UInt8]?, number: Int?, whole = true
        do {
            try JSONReader.read(line) { (p) throws(JSONReader.Failure) in
                try p.members { (key, p) throws(JSONReader.Failure) in
                    switch key {
                    case "token": token = Array(try p.string().utf8)
                    case "status": status = Int(try p.number())
                    case "line":
                        number = Int(try p.number())
                        if number == nil { whole = false }
                    case "reason": if try !p.null() { reason = Array(try p.string().utf8) }
                    default: break
                    }
                }
                try p.end()
            }
        } catch {
            return nil
        }
        guard whole, let token, let status else { return nil }
        return RecordLine(token: token, status: status, reason: reason, line: number)
    }

    /// `token,status,apns_id,reason,timestamp,attempts` and, for `.messages`,
    /// `line,id,error` (the header is checked by the caller).
    static func csv(_ line: [UInt8], layout: RecordLayout) -> RecordLine? {
        guard let fields = csvFields(line), fields.count == layout.columns.count,
              let status = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        var number: Int?
        if layout == .messages {
            guard let n = Int(String(decoding: fields[6], as: UTF8.self)) else { return nil }
            number = n
        }
        return RecordLine(token: fields[0], status: status, reason: fields[3].isEmpty ? nil : fields[3], line: number)
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
