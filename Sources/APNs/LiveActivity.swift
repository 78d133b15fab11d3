/// A Live Activity's ActivityKit push (push type `liveactivity`, topic
/// `<bundle id>.push-type.liveactivity`): the keys Apple documents for the `aps`
/// dictionary ("Starting and updating Live Activities with ActivityKit push
/// notifications"; APNS-PROTOCOL.md, "Live Activities"). Checked when made, so
/// a payload ActivityKit would drop is never sent.
///
/// ```swift
/// let start = try LiveActivity(event: .start, timestamp: now, contentState: .object([("score", "0-0")]),
///                              attributesType: "MatchAttributes", attributes: .object([("home", "A"), ("away", "B")]),

///                              alert: .init(title: "Kick-off", body: "A vs B"))
/// let note = try Notification(topic: "com.example.app", pushType: .liveactivity,
///                             payload: Payload(aps: APS(liveActivity: start)))
/// ```
public struct LiveActivity: Sendable, Hashable {
    /// Start, update or end (`event`).
    public var event: LiveActivityEvent
    /// When the content was current, UNIX seconds: ActivityKit ignores an update
    /// older than the one it shows.
    public var timestamp: Int64
    /// The app's `ContentState`, encoded as ActivityKit decodes it.
    public var contentState: JSONValue?
    /// When the system marks the content stale, UNIX seconds.
    public var staleDate: Int64?
    /// `end` only: when the ended activity leaves the Lock Screen, UNIX seconds.
    public var dismissalDate: Int64?
    /// Which of the app's activities leads in the Dynamic Island (higher first).
    public var relevanceScore: Double?
    /// `start` only: the name of the app's `ActivityAttributes` type.
    public var attributesType: String?
    /// `start` only: that type's static attributes.
    public var attributes: JSONValue?
    /// Required for `start`; on `update` and `end` it lights the device.
    public var alert: APS.Alert?
    /// `start` only (iOS 18): ask for a push token for updates (`input-push-token: 1`).
    public var inputPushToken: Bool
    /// `start` only (iOS 18): subscribe the activity to this broadcast channel (its id,
    /// base64, as APNs made it) for updates (`input-push-channel`). An activity is
    /// updated through its own token or through a channel, not both.
    public var inputPushChannel: String?

    /// Which of ActivityKit's rules a Live Activity payload breaks.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// No `aps.event`.
        case missingEvent
        /// An `aps.event` other than start, update or end.
        case unknownEvent(String)
        /// No `aps.timestamp`.
        case missingTimestamp
        /// A start or update without `aps.content-state`.
        case missingContentState(LiveActivityEvent)
        /// A start without this key (`attributes-type`, `attributes` or `alert`).
        case startNeeds(String)
        /// This key on an update or end; it belongs to a start.
        case onlyForStart(String)
        /// This key on a start or update; it belongs to an end.
        case onlyForEnd(String)
        /// This key (a date or the relevance score) is not a JSON number.
        case notANumber(String)
        /// This key (`content-state` or `attributes`) is not a JSON object.
        case notAnObject(String)
        /// Both `input-push-token` and `input-push-channel`.
        case tokenAndChannel
        /// An `input-push-channel` that is not a channel id.
        case badChannelID

        /// One line naming the key and the rule.
        public var description: String {
            switch self {
            case .missingEvent: "a Live Activity payload needs aps.event (start, update or end)"
            case .unknownEvent(let e): "aps.event '\(e)' is not start, update or end"
            case .missingTimestamp: "a Live Activity payload needs aps.timestamp (UNIX seconds)"
            case .missingContentState(let e): "a Live Activity \(e.rawValue) needs aps.content-state"
            case .startNeeds(let key): "a Live Activity start needs aps.\(key)"
            case .onlyForStart(let key): "aps.\(key) belongs to a Live Activity start only"
            case .onlyForEnd(let key): "aps.\(key) belongs to a Live Activity end only"
            case .notANumber(let key): "aps.\(key) must be a number (UNIX seconds, or the score)"
            case .notAnObject(let key): "aps.\(key) must be a JSON object"
            case .tokenAndChannel:
                "aps.input-push-token and aps.input-push-channel: an activity is updated through its own token or a channel, not both"
            case .badChannelID: "aps.input-push-channel must be a broadcast channel id (base64, as APNs made it)"
            }
        }
    }

    /// A Live Activity's `aps` keys, checked against ActivityKit's rules for `event`:
    /// a start needs `contentState`, `attributesType`, `attributes` and `alert`; an
    /// update needs `contentState`; only an end takes `dismissalDate`.
    public init(event: LiveActivityEvent, timestamp: Int64, contentState: JSONValue? = nil,
                staleDate: Int64? = nil, dismissalDate: Int64? = nil, relevanceScore: Double? = nil,
                attributesType: String? = nil, attributes: JSONValue? = nil, alert: APS.Alert? = nil,
                inputPushToken: Bool = false, inputPushChannel: String? = nil) throws(LiveActivity.Error) {
        self.event = event
        self.timestamp = timestamp
        self.contentState = contentState
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.relevanceScore = relevanceScore
        self.attributesType = attributesType
        self.attributes = attributes
        self.alert = alert
        self.inputPushToken = inputPushToken
        self.inputPushChannel = inputPushChannel
        var keys: Set<String> = ["event", "timestamp"]
        if contentState != nil { keys.insert("content-state") }
        if dismissalDate != nil { keys.insert("dismissal-date") }
        if attributesType != nil { keys.insert("attributes-type") }
        if attributes != nil { keys.insert("attributes") }
        if alert != nil { keys.insert("alert") }
        if inputPushToken { keys.insert("input-push-token") }
        if inputPushChannel != nil { keys.insert("input-push-channel") }
        try LiveActivity.checkRules(event: event, keys: keys)
        if let inputPushChannel, !LiveActivity.isChannelID(inputPushChannel) { throw .badChannelID }
        if let contentState, !contentState.isObject { throw .notAnObject("content-state") }
        if let attributes, !attributes.isObject { throw .notAnObject("attributes") }
    }

    /// The rules every Live Activity payload follows, by the `aps` keys present.
    static func checkRules(event: LiveActivityEvent, keys: Set<String>) throws(LiveActivity.Error) {
        guard keys.contains("timestamp") else { throw .missingTimestamp }
        if event != .end, !keys.contains("content-state") { throw .missingContentState(event) }
        if event == .start {
            for key in ["attributes-type", "attributes", "alert"] where !keys.contains(key) {
                throw .startNeeds(key)
            }
        } else {
            for key in ["attributes-type", "attributes", "input-push-token", "input-push-channel"] where keys.contains(key) {
                throw .onlyForStart(key)
            }
        }
        if keys.contains("input-push-token"), keys.contains("input-push-channel") { throw .tokenAndChannel }
        if event != .end, keys.contains("dismissal-date") { throw .onlyForEnd("dismissal-date") }
    }

    /// The keys this puts into `aps`, in Apple's documented order.
    var apsMembers: [(String, JSONValue)] {
        var o: [(String, JSONValue)] = [("timestamp", .int(Int(timestamp))), ("event", .string(event.rawValue))]
        if let contentState { o.append(("content-state", contentState)) }
        if let staleDate { o.append(("stale-date", .int(Int(staleDate)))) }
        if let dismissalDate { o.append(("dismissal-date", .int(Int(dismissalDate)))) }
        if let relevanceScore { o.append(("relevance-score", .double(relevanceScore))) }
        if let attributesType { o.append(("attributes-type", .string(attributesType))) }
        if let attributes { o.append(("attributes", attributes)) }
        if inputPushToken { o.append(("input-push-token", .int(1))) }
        if let inputPushChannel { o.append(("input-push-channel", .string(inputPushChannel))) }
        return o
    }

    /// A broadcast channel id as APNs makes them: base64 (standard alphabet, padded),
    /// at most 63 bytes, as the channel routes accept.
    static func isChannelID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard !bytes.isEmpty, bytes.count < 64, bytes.count % 4 == 0 else { return false }
        let padding = bytes.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return bytes.dropLast(padding).allSatisfy { b in
            (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) ||
                b == UInt8(ascii: "+") || b == UInt8(ascii: "/")
        }
    }

    /// Checks a payload written by hand (a file, an API caller) for a `liveactivity`
    /// push: its `aps` must follow the same rules as a typed `LiveActivity`.
    /// Returns its event.
    @discardableResult
    public static func check(_ payload: Payload) throws(LiveActivity.Error) -> LiveActivityEvent {
        let aps = TopLevel(payload.bytes).member("aps").map { TopLevel($0) }
        guard let aps, let eventValue = aps.member("event") else { throw .missingEvent }
        guard let name = TopLevel.stringValue(eventValue) else { throw .unknownEvent(String(decoding: eventValue, as: UTF8.self)) }
        guard let event = LiveActivityEvent(rawValue: name) else { throw .unknownEvent(name) }
        let keys = Set(aps.keys)
        try checkRules(event: event, keys: keys)
        for key in ["timestamp", "stale-date", "dismissal-date", "relevance-score"] {
            if let v = aps.member(key), !TopLevel.isNumber(v) { throw .notANumber(key) }
        }
        for key in ["content-state", "attributes"] {
            if let v = aps.member(key), v.first != UInt8(ascii: "{") { throw .notAnObject(key) }
        }
        if let v = aps.member("input-push-channel"),
           !(TopLevel.stringValue(v).map(LiveActivity.isChannelID) ?? false) { throw .badChannelID }
        return event
    }
}

/// `aps.event`.
public enum LiveActivityEvent: String, Sendable, Hashable, CaseIterable {
    /// Starts an activity on the device (iOS 17.2 and later).
    case start
    /// Replaces the activity's content state.
    case update
    /// Ends the activity, which stays on the Lock Screen until its dismissal date.
    case end
}


extension PushType {
    /// The topic a Live Activity push goes to: the bundle id with `.push-type.liveactivity`.
    public static func liveActivityTopic(bundleID: String) -> String {
        let suffix = PushType.liveactivity.topicSuffix
        return bundleID.hasSuffix(suffix) ? bundleID : bundleID + suffix
    }
}

extension JSONValue {
    var isObject: Bool {
        if case .object = self { return true }
        return false
    }
}

/// The members of one JSON object in compact, valid JSON (a `Payload`'s bytes are
/// both): each value as its raw bytes. Reading is bounded by the input; a value
/// is skipped by counting brackets outside strings.
private struct TopLevel {
    let members: [(key: String, value: ArraySlice<UInt8>)]

    init(_ bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        var out: [(String, ArraySlice<UInt8>)] = []
        var i = 0
        guard b.first == UInt8(ascii: "{") else { members = []; return }
        i = 1
        while i < b.count, b[i] == UInt8(ascii: "\"") {
            let keyEnd = TopLevel.stringEnd(b, from: i)
            let key = String(decoding: b[(i + 1)..<(keyEnd - 1)], as: UTF8.self)
            i = keyEnd + 1                                      // past ':'
            let valueEnd = TopLevel.valueEnd(b, from: i)
            out.append((key, b[i..<valueEnd]))
            i = valueEnd
            if i < b.count, b[i] == UInt8(ascii: ",") { i += 1 } else { break }
        }
        members = out
    }

    var keys: [String] { members.map(\.key) }

    func member(_ key: String) -> ArraySlice<UInt8>? {
        members.first { $0.key == key }?.value
    }

    /// One past the closing quote of the string starting at `from`.
    static func stringEnd(_ b: [UInt8], from: Int) -> Int {
        var i = from + 1
        while i < b.count {
            if b[i] == UInt8(ascii: "\\") { i += 2; continue }
            if b[i] == UInt8(ascii: "\"") { return i + 1 }
            i += 1
        }
        return b.count
    }

    /// One past the end of the value starting at `from`.
    static func valueEnd(_ b: [UInt8], from: Int) -> Int {
        guard from < b.count else { return b.count }
        if b[from] == UInt8(ascii: "\"") { return stringEnd(b, from: from) }
        var depth = 0, i = from
        while i < b.count {
            switch b[i] {
            case UInt8(ascii: "\""): i = stringEnd(b, from: i); continue
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return i }
                depth -= 1
                if depth == 0 { return i + 1 }
            case UInt8(ascii: ","): if depth == 0 { return i }
            default: break
            }
            i += 1
        }
        return b.count
    }

    static func stringValue(_ v: ArraySlice<UInt8>) -> String? {
        guard v.count >= 2, v.first == UInt8(ascii: "\""), v.last == UInt8(ascii: "\""),
              !v.contains(UInt8(ascii: "\\")) else { return nil }
        return String(decoding: v.dropFirst().dropLast(), as: UTF8.self)
    }

    static func isNumber(_ v: ArraySlice<UInt8>) -> Bool {
        guard let first = v.first else { return false }
        return first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9"))
    }
}
