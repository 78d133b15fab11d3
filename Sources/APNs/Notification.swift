/// One notification's headers and payload, checked against APNs' rules when made,
/// so that nothing APNs would refuse for its form is ever sent.
public struct Notification: Sendable, Hashable {
    /// The app's bundle id, with the push type's suffix (".voip", ...) added when missing.
    public let topic: String
    /// `apns-push-type`.
    public let pushType: PushType
    /// nil sends no header (APNs then uses 10), except for background pushes, which get 5.
    public let priority: Priority?
    /// `apns-expiration`; nil sends no header (APNs then stores and retries as it sees fit).
    public let expiration: Expiration?
    /// `apns-collapse-id`: notifications with the same one replace each other on the
    /// device; at most 64 bytes.
    public let collapseID: String?
    /// The body.
    public let payload: Payload

    /// Why a notification cannot be made: APNs would refuse it for its form.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The topic is empty or white space.
        case missingTopic
        /// The payload is larger than the push type's `PushType.payloadLimit`.
        case payloadTooLarge(size: Int, limit: Int, pushType: PushType)
        /// The collapse id is longer than 64 bytes.
        case collapseIDTooLong(bytes: Int)
        /// A priority the push type does not take (10 for a background push).
        case priorityNotAllowed(Priority, PushType)
        /// An expiration before 1970.
        case negativeExpiration
        /// A control character (below 0x20, or 0x7f) in a header value: it could
        /// split the header and inject another one.
        case invalidHeaderValue(field: String)

        /// One line saying what is wrong and what APNs accepts.
        public var description: String {
            switch self {
            case .missingTopic: "a topic (the app's bundle id) is required"
            case .payloadTooLarge(let size, let limit, let type):
                "payload is \(size) bytes without white space; APNs accepts at most \(limit) for \(type.rawValue) pushes"
            case .collapseIDTooLong(let n): "collapse id is \(n) bytes; APNs accepts at most 64"
            case .priorityNotAllowed(let p, let type):
                "priority \(p.rawValue) is not allowed for \(type.rawValue) pushes (use 5 or 1)"
            case .negativeExpiration: "expiration must be a UNIX time in seconds, 0 or later"
            case .invalidHeaderValue(let field): "\(field) has a control character (CR, LF, TAB, ...); header values cannot carry them"
            }
        }
    }

    /// A notification, checked against APNs' rules: the topic gets the push type's
    /// suffix when it lacks it, and a background push without a priority gets 5.
    public init(topic: String, pushType: PushType = .alert, priority: Priority? = nil,

                expiration: Expiration? = nil, collapseID: String? = nil, payload: Payload) throws(Notification.Error) {
        let bundle = topic.trimmingSpaces
        guard !bundle.isEmpty else { throw .missingTopic }
        guard Notification.isHeaderValue(bundle) else { throw .invalidHeaderValue(field: "apns-topic") }
        if let collapseID, !Notification.isHeaderValue(collapseID) { throw .invalidHeaderValue(field: "apns-collapse-id") }
        guard payload.count <= pushType.payloadLimit else {
            throw .payloadTooLarge(size: payload.count, limit: pushType.payloadLimit, pushType: pushType)
        }
        if let collapseID, collapseID.utf8.count > 64 { throw .collapseIDTooLong(bytes: collapseID.utf8.count) }
        if pushType == .background, priority == .immediate { throw .priorityNotAllowed(.immediate, pushType) }
        if case .at(let seconds)? = expiration, seconds < 0 { throw .negativeExpiration }

        let suffix = pushType.topicSuffix
        self.topic = suffix.isEmpty || bundle.hasSuffix(suffix) ? bundle : bundle + suffix
        self.pushType = pushType
        self.priority = priority ?? (pushType == .background ? .powerConsiderate : nil)
        self.expiration = expiration
        self.collapseID = collapseID
        self.payload = payload
    }
}

extension Notification {
    /// True when `value` has no byte below 0x20 and no 0x7f (DEL).
    static func isHeaderValue(_ value: String) -> Bool {
        // Over the contiguous bytes: a per-event send makes a notification each, and
        // iterating the UTF8View byte by byte was ~0.7% of a single send's CPU.
        var value = value
        return value.withUTF8 { bytes in
            for b in bytes where b < 0x20 || b == 0x7f { return false }
            return true
        }
    }
}

extension String {
    var trimmingSpaces: String {
        // Nearly always there is nothing to trim (a topic per event, made by a program):
        // an ASCII first and last byte that is neither white space nor a control
        // character says so without breaking the text into characters.
        if let first = utf8.first, let last = utf8.last,
           (0x21..<0x7F).contains(first), (0x21..<0x7F).contains(last) { return self }
        var s = Substring(self)
        while s.first?.isWhitespace == true { s.removeFirst() }
        while s.last?.isWhitespace == true { s.removeLast() }
        return String(s)
    }
}
