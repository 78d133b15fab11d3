import APNs

/// One token's record, as written: `{"token","status","apns_id","reason","timestamp","attempts"}`,
/// always those six keys in that order. `apns_id` is null when the token was never
/// sent, `reason` null when there is none, `timestamp` (ms) set on 410 only.
///
/// A `--messages` run's records add `"line"` (the message's line, 1-based) and
/// `"id"` (only when the message gave one) after `attempts`.
///
/// JSON Lines adds a last key, `"error"`, only when status is 0 and there is a
/// reason why there was no answer (connection refused, TLS failure, timeout,
/// malformed token, invalid message line): the place a user looks when a record has
/// no status. A `PAYLOAD TOKENS` run's CSV keeps the six columns exactly (the same
/// error text reaches stderr in the summary); a `--messages` run's CSV has
/// `line,id,error` columns after them, since its errors differ line by line.
enum Record {
    /// Appends the record to `out`: the writer's buffer, so a record costs no allocation of its own.
    static func json(_ r: DeliveryResult, context: LineContext? = nil, to out: inout [UInt8]) {
        append(&out, "{\"token\":")
        jsonString(r.token, to: &out)
        append(&out, ",\"status\":")
        decimal(Int64(r.status), to: &out)
        append(&out, ",\"apns_id\":")
        jsonOptional(r.apnsID, to: &out)
        append(&out, ",\"reason\":")
        jsonOptional(r.reason?.rawValue, to: &out)
        append(&out, ",\"timestamp\":")
        if let t = timestamp(r) { decimal(t, to: &out) } else { append(&out, "null") }
        append(&out, ",\"attempts\":")
        decimal(Int64(r.attempts), to: &out)
        if let context {
            append(&out, ",\"line\":")
            decimal(Int64(context.line), to: &out)
            if let id = context.id {
                append(&out, ",\"id\":")
                jsonString(id, to: &out)
            }
        }
        if r.status == 0, let error = r.error {
            append(&out, ",\"error\":")
            jsonString(error, to: &out)
        }
        append(&out, "}\n")
    }

    static func csv(_ r: DeliveryResult, context: LineContext? = nil, to out: inout [UInt8]) {
        var fields = [r.token, String(r.status), r.apnsID ?? "", r.reason?.rawValue ?? "",
                      timestamp(r).map { String($0) } ?? "", String(r.attempts)]
        if let context {
            fields += [String(context.line), context.id ?? "", r.status == 0 ? r.error ?? "" : ""]
        }
        out.append(contentsOf: (fields.map(csvField).joined(separator: ",") + "\r\n").utf8)
    }

    /// The digits written straight into `out`, as `String(n)` spells them.
    private static func decimal(_ n: Int64, to out: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)   // 24 bytes: an Int64 has at most 20 and a sign
        withUnsafeMutableBytes(of: &digits) { buffer in
            var v = n.magnitude, k = buffer.count
            repeat {
                k -= 1
                buffer[k] = UInt8(ascii: "0") + UInt8(v % 10)
                v /= 10
            } while v != 0
            if n < 0 {
                k -= 1
                buffer[k] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[k...]))
        }
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

    private static func append(_ out: inout [UInt8], _ s: StaticString) {
        out.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
    }

    private static func jsonOptional(_ s: String?, to out: inout [UInt8]) {
        if let s { jsonString(s, to: &out) } else { append(&out, "null") }
    }

    static func jsonString(_ s: String, to out: inout [UInt8]) {
        // Tokens and apns-ids need no escape: one scan of the String's own bytes, one copy.
        let copied: Bool? = s.utf8.withContiguousStorageIfAvailable { bytes in
            guard !needsEscape(bytes) else { return false }
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: bytes)
            out.append(UInt8(ascii: "\""))
            return true
        }
        if copied == true { return }
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

    /// True when a byte is a control character, a quote or a backslash, tested 8 bytes
    /// a step ("has a byte below 0x20" and "has a zero byte" after XOR with '"' and
    /// '\\'); a false alarm would only take the escaping path, which writes the same bytes.
    private static func needsEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while bytes.count - i >= 8 {
            let w = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5C)
            let hits = ((w &- ones &* 0x20) | (quote &- ones) | (backslash &- ones)) & ~w & high
            // `~w` stands for `~quote` and `~backslash` too: XOR with 0x22 or 0x5C keeps the high bits.
            if hits != 0 { return true }
            i += 8
        }
        while i < bytes.count {
            let c = bytes[i]
            if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { return true }
            i += 1
        }
        return false
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        var out = ""
        for ch in self { out += ch == "\"" ? "\"\"" : String(ch) }
        return out
    }
}
