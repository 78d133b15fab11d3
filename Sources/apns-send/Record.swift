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
    /// Appends the record to `out`: the writer's buffer, so a record costs no allocation
    /// of its own. The record is put together in scratch room sized for the worst case
    /// and appended in one piece: a dozen appends of a few bytes each, every one
    /// checking the array's capacity and uniqueness, cost more than the bytes.
    static func json(_ r: DeliveryResult, context: LineContext? = nil, to out: inout [UInt8]) {
        let reason = r.reason?.rawValue
        let error = r.status == 0 ? r.error : nil
        var strings = r.token.utf8.count + r.apnsIDUTF8Count + (reason?.utf8.count ?? 0)
            + (context?.id?.utf8.count ?? 0) + (error?.utf8.count ?? 0)
        strings = strings * JSONWriter.escapedMax + 256   // the keys, quotes and numbers fit in 256
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: strings) { room in
            var w = JSONWriter(room.baseAddress!)
            w.put("{\"token\":")
            var token = r.token
            if r.tokenIsPlain { token.withUTF8 { w.plain($0) } } else { w.string(token) }
            w.put(",\"status\":")
            w.decimal(Int64(r.status))
            w.put(",\"apns_id\":")
            // Written from its bytes: one the library made has no String until read.
            let wrote = r.withAPNsIDUTF8 { bytes, plain in
                if plain { w.plain(bytes) } else { w.string(bytes) }
            }
            if !wrote { w.put("null") }
            w.put(",\"reason\":")
            w.optional(reason)
            w.put(",\"timestamp\":")
            if let t = timestamp(r) { w.decimal(t) } else { w.put("null") }
            w.put(",\"attempts\":")
            w.decimal(Int64(r.attempts))
            if let context {
                w.put(",\"line\":")
                w.decimal(Int64(context.line))
                if let id = context.id {
                    w.put(",\"id\":")
                    w.string(id)
                }
            }
            if let error {
                w.put(",\"error\":")
                w.string(error)
            }
            w.put("}\n")
            out.append(contentsOf: UnsafeBufferPointer(rebasing: room[..<w.count(from: room.baseAddress!)]))
        }
    }

    static func csv(_ r: DeliveryResult, context: LineContext? = nil, to out: inout [UInt8]) {
        var fields = [r.token, String(r.status), r.apnsID ?? "", r.reason?.rawValue ?? "",
                      timestamp(r).map { String($0) } ?? "", String(r.attempts)]
        if let context {
            fields += [String(context.line), context.id ?? "", r.status == 0 ? r.error ?? "" : ""]
        }
        out.append(contentsOf: (fields.map(csvField).joined(separator: ",") + "\r\n").utf8)
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

    /// `s` as a JSON string, appended to `out`.
    static func jsonString(_ s: String, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: s.utf8.count * JSONWriter.escapedMax + 2) { room in
            var w = JSONWriter(room.baseAddress!)
            w.string(s)
            out.append(contentsOf: UnsafeBufferPointer(rebasing: room[..<w.count(from: room.baseAddress!)]))
        }
    }

    /// True when a byte is a control character, a quote or a backslash, tested 8 bytes
    /// a step ("has a byte below 0x20" and "has a zero byte" after XOR with '"' and
    /// '\\'); a false alarm would only take the escaping path, which writes the same bytes.
    fileprivate static func needsEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, high: UInt64 = 0x8080_8080_8080_8080
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        // The words' hits are gathered and tested once: strings that need escaping are rare.
        var hits: UInt64 = 0
        while bytes.count - i >= 8 {
            let w = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self))
            let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5C)
            hits |= ((w &- ones &* 0x20) | (quote &- ones) | (backslash &- ones)) & ~w
            // `~w` stands for `~quote` and `~backslash` too: XOR with 0x22 or 0x5C keeps the high bits.
            i += 8
        }
        if hits & high != 0 { return true }
        while i < bytes.count {
            let c = bytes[i]
            if c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") { return true }
            i += 1
        }
        return false
    }
}

/// Writes JSON through a pointer into room the caller sized (`escapedMax` bytes for
/// each byte of a string, plus the rest): no capacity check per piece.
private struct JSONWriter {
    /// A string's byte takes at most 6 bytes escaped (\u001f).
    static let escapedMax = 6
    private var at: UnsafeMutablePointer<UInt8>

    init(_ start: UnsafeMutablePointer<UInt8>) { at = start }

    func count(from start: UnsafeMutablePointer<UInt8>) -> Int { at - start }

    @inline(__always)
    mutating func put(_ s: StaticString) {
        let n = s.utf8CodeUnitCount
        UnsafeMutableRawPointer(at).copyMemory(from: s.utf8Start, byteCount: n)
        at += n
    }

    @inline(__always)
    mutating func put(_ byte: UInt8) {
        at.pointee = byte
        at += 1
    }

    mutating func optional(_ s: String?) {
        if let s { string(s) } else { put("null") }
    }

    /// The digits as `String(n)` spells them.
    mutating func decimal(_ n: Int64) {
        if n < 0 { put(UInt8(ascii: "-")) }
        var v = n.magnitude, digits = 1
        var rest = v / 10
        while rest != 0 {
            digits += 1
            rest /= 10
        }
        var k = digits
        repeat {
            k -= 1
            at[k] = UInt8(ascii: "0") + UInt8(v % 10)
            v /= 10
        } while v != 0
        at += digits
    }

    /// Bytes known to need no escape, quoted.
    mutating func plain(_ bytes: UnsafeBufferPointer<UInt8>) {
        put(UInt8(ascii: "\""))
        if let from = bytes.baseAddress { at.update(from: from, count: bytes.count) }
        at += bytes.count
        put(UInt8(ascii: "\""))
    }

    mutating func string(_ s: String) {
        // Tokens and apns-ids need no escape: one scan of the String's own bytes, one copy.
        var s = s
        s.withUTF8 { string($0) }
    }

    mutating func string(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard Record.needsEscape(bytes) else { return plain(bytes) }
        let hex: StaticString = "0123456789abcdef"
        put(UInt8(ascii: "\""))
        for c in bytes {
            switch c {
            case UInt8(ascii: "\""): put("\\\"")
            case UInt8(ascii: "\\"): put("\\\\")
            case 0x0A: put("\\n")
            case 0x0D: put("\\r")
            case 0x09: put("\\t")
            case 0x00..<0x20:
                put("\\u00")
                put(hex.utf8Start[Int(c >> 4)])
                put(hex.utf8Start[Int(c & 0xF)])
            default: put(c)
            }
        }
        put(UInt8(ascii: "\""))
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        var out = ""
        for ch in self { out += ch == "\"" ? "\"\"" : String(ch) }
        return out
    }
}
