import APNs

/// How a result file is written.
enum OutputFormat: String, CaseIterable {
    /// One JSON object per line.
    case jsonl
    /// RFC 4180: a header line, then one row per token, CRLF line ends.
    case csv
}

/// One token's record, as written: `{"token","status","apns_id","reason","timestamp","attempts"}`,
/// always those six keys in that order. `apns_id` is null when the token was never
/// sent, `reason` null when there is none, `timestamp` (ms) set on 410 only.
///
/// JSON Lines adds a seventh key, `"error"`, only when status is 0 and the library
/// says why there was no answer (connection refused, TLS failure, timeout,
/// malformed token): the place a user looks when a record has no status. CSV keeps
/// the six columns exactly; the same error text reaches stderr in the summary.
enum Record {
    static let columns = ["token", "status", "apns_id", "reason", "timestamp", "attempts"]

    static func csvHeader() -> [UInt8] {
        Array((columns.joined(separator: ",") + "\r\n").utf8)
    }

    static func json(_ r: DeliveryResult) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        append(&out, "{\"token\":")
        jsonString(r.token, to: &out)
        append(&out, ",\"status\":\(r.status),\"apns_id\":")
        jsonOptional(r.apnsID, to: &out)
        append(&out, ",\"reason\":")
        jsonOptional(r.reason?.rawValue, to: &out)
        append(&out, ",\"timestamp\":")
        append(&out, timestamp(r).map { String($0) } ?? "null")
        append(&out, ",\"attempts\":\(r.attempts)")
        if r.status == 0, let error = r.error {
            append(&out, ",\"error\":")
            jsonString(error, to: &out)
        }
        append(&out, "}\n")
        return out
    }

    static func csv(_ r: DeliveryResult) -> [UInt8] {
        let fields = [r.token, String(r.status), r.apnsID ?? "", r.reason?.rawValue ?? "",
                      timestamp(r).map { String($0) } ?? "", String(r.attempts)]
        return Array((fields.map(csvField).joined(separator: ",") + "\r\n").utf8)
    }

    /// The 410 timestamp; APNs sends none with other statuses, and none is reported.
    private static func timestamp(_ r: DeliveryResult) -> Int64? {
        r.status == 410 ? r.timestamp : nil
    }

    /// RFC 4180: quote a field holding a comma, quote, CR or LF; double inner quotes.
    private static func csvField(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == 0x2C || $0 == 0x22 || $0 == 0x0D || $0 == 0x0A }) else { return s }
        return "\"" + s.replacingQuotes() + "\""
    }

    private static func append(_ out: inout [UInt8], _ s: String) {
        out.append(contentsOf: s.utf8)
    }

    private static func jsonOptional(_ s: String?, to out: inout [UInt8]) {
        if let s { jsonString(s, to: &out) } else { append(&out, "null") }
    }

    static func jsonString(_ s: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): append(&out, "\\\"")
            case UInt8(ascii: "\\"): append(&out, "\\\\")
            case 0x0A: append(&out, "\\n")
            case 0x0D: append(&out, "\\r")
            case 0x09: append(&out, "\\t")
            case 0x00..<0x20:
                append(&out, "\\u00")
                out.append(hex[Int(c >> 4)])
                out.append(hex[Int(c & 0xF)])
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        var out = ""
        for ch in self { out += ch == "\"" ? "\"\"" : String(ch) }
        return out
    }
}
