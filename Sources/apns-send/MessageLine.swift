import APNs

/// What a `--messages` line falls back to for the keys it leaves out: the flags.
/// With no flag either: push type alert, no apns-priority header (APNs' 10; 5 for
/// background), no expiration or collapse id; a line without "topic" needs --topic.
struct MessageDefaults: Sendable {
    var topic: String?
    var pushType: PushType = .alert
    var priority: Priority?
    var expiration: Expiration?
    var collapseID: String?
}

/// One line of a `--messages` file, turned into a message to send or into the
/// local record that refuses it (status 0, never sent):
///
///     {"token":"…hex…","payload":{…},"id":"evt-1","push_type":"background","priority":5,
///      "collapse_id":"order-7","expiration":0,"topic":"…","environment":"sandbox"}
///
/// - Not JSON, not an object, no "token" or "payload", a key of the wrong type or
///   value, a header value with a control character, a known key given twice:
///   reason `InvalidMessage`, with every problem of the line in "error".
/// - Otherwise a token that is not 64 to 200 hex digits: `BadDeviceToken`.
/// - Otherwise a payload over the push type's limit: `PayloadTooLarge`.
///
/// A null value counts as the key left out. Unknown keys are ignored (as APNs
/// ignores unknown payload keys), so producers may carry their own fields.
enum MessageLine {
    enum Parsed {
        case message(Message<LineContext>)
        /// The local record, and the line and id it is written with.
        case refused(DeliveryResult, LineContext)
    }

    static let invalidMessage = Reason(rawValue: "InvalidMessage")

    static let keys: Set<String> = ["token", "payload", "id", "push_type", "priority", "collapse_id",
                                    "expiration", "topic", "environment"]

    /// `cut`: the reader cut the line at `LineReader.maxLine` bytes.
    static func parse(_ raw: [UInt8], line: Int, defaults: MessageDefaults, cut: Bool = false) -> Parsed {
        var token = "", id: String?
        func refuse(_ reason: Reason, _ why: String) -> Parsed {
            .refused(DeliveryResult(token: token, apnsID: nil, status: 0, reason: reason, attempts: 0, error: why),
                     LineContext(line: line, id: id))
        }
        if cut { return refuse(invalidMessage, "line longer than \(LineReader.maxLine) bytes") }
        // The library's checker first: the line is one JSON object, or it is refused
        // with the place it went wrong. What is left to read is well formed.
        let object: Payload
        do {
            object = try Payload(json: raw)
        } catch {
            switch error {
            case .empty: return refuse(invalidMessage, "empty line")
            case .notJSON(let why): return refuse(invalidMessage, "not valid JSON: \(why)")
            case .notAnObject: return refuse(invalidMessage, "not a JSON object ({...})")
            }
        }
        var fields = Fields(bytes: object.bytes)
        var problems: [String] = []
        guard fields.scan(duplicates: &problems) else { return refuse(invalidMessage, "not a JSON object ({...})") }

        // "id" and "token" first: the record carries them even when the line is refused.
        if let v = fields["id"] {
            if let s = v.string { id = s } else { problems.append("\"id\" must be a string") }
        }
        switch fields["token"] {
        case nil: problems.append("no \"token\"")
        case let v?:
            if let s = v.string { token = s } else { problems.append("\"token\" must be a string of hex digits") }
        }
        var payload: Payload?
        switch fields["payload"] {
        case nil: problems.append("no \"payload\"")
        case let v?:
            if v.kind == .object, let p = try? Payload(json: v.bytes) {
                payload = p
            } else {
                problems.append("\"payload\" must be a JSON object")
            }
        }

        var pushType = defaults.pushType
        if let v = fields["push_type"] {
            if let s = v.string, let t = PushType(rawValue: s) {
                pushType = t
            } else {
                problems.append("\"push_type\" \(v.shown) is not one of \(PushType.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        }
        var priority = defaults.priority
        if let v = fields["priority"] {
            if v.kind == .number, let n = Int(v.text), let p = Priority(rawValue: n) {
                priority = p
            } else {
                problems.append("\"priority\" \(v.shown) is not 10, 5 or 1")
            }
        }
        var expiration = defaults.expiration
        if let v = fields["expiration"] {
            if v.kind == .number, let n = Int64(v.text), n >= 0 {
                expiration = n == 0 ? .immediately : .at(unixSeconds: n)
            } else {
                problems.append("\"expiration\" \(v.shown) is not a UNIX time in whole seconds, 0 or later")
            }
        }
        var collapseID = defaults.collapseID
        if let v = fields["collapse_id"] {
            if let s = v.string {
                if let c = HeaderValue.controlCharacter(in: s) {
                    problems.append("\"collapse_id\" has a control character, \(HeaderValue.describe(c)); header values cannot carry one")
                } else if s.utf8.count > 64 {
                    problems.append("\"collapse_id\" is \(s.utf8.count) bytes; APNs accepts at most 64")
                } else {
                    collapseID = s
                }
            } else {
                problems.append("\"collapse_id\" must be a string")
            }
        }
        var topic = defaults.topic
        if let v = fields["topic"] {
            if let s = v.string {
                if let c = HeaderValue.controlCharacter(in: s) {
                    problems.append("\"topic\" has a control character, \(HeaderValue.describe(c)); header values cannot carry one")
                } else if s.allSatisfy(\.isWhitespace) {
                    problems.append("\"topic\" is empty")
                } else {
                    topic = s
                }
            } else {
                problems.append("\"topic\" must be a string")
            }
        } else if topic == nil {
            problems.append("no \"topic\" on the line and no --topic")
        }
        var environment: Environment?
        if let v = fields["environment"] {
            switch v.string {
            case "sandbox": environment = .sandbox
            case "production": environment = .production
            default: problems.append("\"environment\" \(v.shown) is not sandbox or production")
            }
        }

        if !problems.isEmpty { return refuse(invalidMessage, problems.joined(separator: "; ")) }
        guard let device = DeviceToken(token) else {
            return refuse(.badDeviceToken, "not 64 to 200 hex digits (even count)")
        }
        let notification: Notification
        do {
            notification = try Notification(topic: topic!, pushType: pushType, priority: priority, expiration: expiration,
                                            collapseID: collapseID, payload: payload!)
        } catch {
            if case .payloadTooLarge = error { return refuse(.payloadTooLarge, error.description) }
            return refuse(invalidMessage, error.description)
        }
        return .message(Message(token: device.hex, notification: notification, environment: environment,
                                apnsID: apnsID(raw, line: line), context: LineContext(line: line, id: id)))
    }

    /// The apns-id of a line: a UUID (version 8, RFC 9562) derived from the line's
    /// number and bytes, so a line sent again by `--resume` after a kill carries the
    /// same apns-id, and logs can tell a resend from two messages.
    static func apnsID(_ raw: [UInt8], line: Int) -> String {
        let f = TokenFingerprint(raw, seed: UInt64(line))
        var hex = Array(hex16(f.a) + hex16(f.b))
        hex[12] = "8"
        hex[16] = Array("89ab")[Int(hex[16].hexDigitValue! & 3)]
        let s = String(hex)
        func part(_ from: Int, _ to: Int) -> Substring { s.dropFirst(from).prefix(to - from) }
        return "\(part(0, 8))-\(part(8, 12))-\(part(12, 16))-\(part(16, 20))-\(part(20, 32))"
    }

    private static func hex16(_ x: UInt64) -> String {
        let h = String(x, radix: 16)
        return String(repeating: "0", count: 16 - h.count) + h
    }
}

/// The known keys of one compact JSON object, each with its value's kind and bytes.
private struct Fields {
    struct Value {
        let kind: JSONReader.Kind
        let bytes: ArraySlice<UInt8>

        /// The unescaped string, nil when the value is not one.
        var string: String? {
            guard kind == .string else { return nil }
            return try? JSONReader.read(Array(bytes)) { (p) throws(JSONReader.Failure) in try p.string() }
        }

        /// A number's spelling.
        var text: String { String(decoding: bytes, as: UTF8.self) }

        /// The value for an error text: short, and without raw control characters.
        var shown: String {
            let s = kind == .string ? "'\(string ?? "")'" : text
            var out = ""
            for scalar in s.unicodeScalars.prefix(40) {
                out += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.escaped(asASCII: true) : String(scalar)
            }
            return s.unicodeScalars.count > 40 ? out + "…" : out
        }
    }

    let bytes: [UInt8]
    private var values: [String: Value] = [:]

    init(bytes: [UInt8]) { self.bytes = bytes }

    subscript(key: String) -> Value? { values[key] }

    /// Reads the object's keys; a known key given twice is a problem (which one
    /// would count is a guess). False when the bytes are not an object.
    mutating func scan(duplicates problems: inout [String]) -> Bool {
        let bytes = bytes
        var values: [String: Value] = [:]
        do {
            try JSONReader.read(bytes) { (p) throws(JSONReader.Failure) in
                try p.members { (name, p) throws(JSONReader.Failure) in
                    // Any other key, and a null, is left to `members` to skip.
                    guard MessageLine.keys.contains(name), let kind = p.peekKind(), kind != .null else { return }
                    let span = try p.skipValue()
                    if values[name] != nil {
                        problems.append("\"\(name)\" given twice")
                    } else {
                        values[name] = Value(kind: kind, bytes: bytes[span])
                    }
                }
                try p.end()
            }
        } catch {
            return false
        }
        self.values = values
        return true
    }
}
