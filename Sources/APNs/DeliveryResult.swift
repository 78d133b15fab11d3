/// What happened to one token: the final answer, after any retries.
public struct DeliveryResult: Sendable, Hashable {
    /// The token as sent (lower-case hex), or the input line when it was malformed.
    public let token: String
    /// The apns-id of the notification (ours, echoed by APNs); nil when it was never sent.
    public var apnsID: String? { id.text }
    let id: APNsIDValue
    /// `apns-unique-id`, which APNs sends in the development environment only.
    public let uniqueID: String?
    /// The HTTP status; 0 when no answer from APNs was obtained.
    public let status: Int
    /// APNs' reason, or a local one (`.badDeviceToken` for a malformed token).
    public let reason: Reason?
    /// For 410: when the token stopped being valid, in milliseconds since 1970.
    public var timestamp: Int64? { timestampValue == DeliveryResult.noTimestamp ? nil : timestampValue }
    /// `timestamp`, `noTimestamp` for nil: without an optional's tag byte (and the
    /// padding after it) the result fits in 128 bytes, which a move copies inline.
    private let timestampValue: Int64
    private static let noTimestamp = Int64.min
    /// How many times it was sent (0 when never).
    public let attempts: Int
    /// From the first send to the final answer.
    public let latency: Duration
    /// Why there is no answer from APNs (status 0): connection, TLS or deadline trouble;
    /// or, with APNs' answer, what to fix when it refused the configuration itself (a
    /// provider key restricted to the other environment: BadEnvironmentKeyIdInToken).
    public let error: String?

    /// A result with these fields, for a caller that makes its own (a test double, a
    /// result read back from storage).
    public init(token: String, apnsID: String?, uniqueID: String? = nil, status: Int, reason: Reason?,
                timestamp: Int64? = nil, attempts: Int, latency: Duration = .zero, error: String? = nil) {
        self.init(token: token, id: apnsID.map { .given($0) } ?? .none, uniqueID: uniqueID, status: status,
                  reason: reason, timestamp: timestamp, attempts: attempts, latency: latency, error: error)
    }

    /// True when APNs accepted the notification (200). Acceptance is not delivery to
    /// the device: APNs stores and forwards it.
    public var isDelivered: Bool { status == 200 }

}

extension DeliveryResult {
    /// A result whose apns-id is kept as `id` (one made here, as its random bits).
    init(token: String, id: APNsIDValue, uniqueID: String?, status: Int, reason: Reason?, timestamp: Int64?,
         attempts: Int, latency: Duration, error: String?) {
        self.token = token
        self.id = id
        self.uniqueID = uniqueID
        self.status = status
        self.reason = reason
        timestampValue = timestamp ?? DeliveryResult.noTimestamp
        self.attempts = attempts
        self.latency = latency
        self.error = error
    }

    /// The apns-id's UTF-8 bytes, for a writer: one made here is spelled out on the
    /// stack, with no String made for it. `plain` is true when the bytes need no
    /// escaping in JSON (hex digits and dashes).
    /// False when there is none.
    package func withAPNsIDUTF8(_ body: (UnsafeBufferPointer<UInt8>, _ plain: Bool) -> Void) -> Bool {
        switch id {
        case .none:
            return false
        case .given(var text):
            text.withUTF8 { body($0, false) }
        case .random(let first, let second):
            var room: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)   // 40 bytes
            withUnsafeMutableBytes(of: &room) { raw in
                writeUUID(raw.baseAddress!, first, second)
                body(UnsafeBufferPointer(start: raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count: uuidLength), true)
            }
        }
        return true
    }

    /// True when the token is known to need no escaping in JSON, with no scan: an
    /// apns-id made by a lane means the lane sent the request, and a lane sends only
    /// validated tokens (lower-case hex digits; empty for a broadcast).
    package var tokenIsPlain: Bool {
        if case .random = id { true } else { false }
    }

    /// How many UTF-8 bytes `apnsID` has (0 when nil), without spelling it out.
    package var apnsIDUTF8Count: Int {
        switch id {
        case .none: 0
        case .given(let text): text.utf8.count
        case .random: uuidLength
        }
    }
}

/// A result's apns-id as kept. One made here stays the two random words it was
/// spelled from: most results of a batch go straight to a record, which writes the
/// digits itself, so no String (an allocation) is made for it unless it is read.
/// Equal, and hashed, as the text it stands for.
enum APNsIDValue: Sendable, Hashable {
    case none
    case given(String)
    /// The words `randomUUIDWords` drew (version and variant set).
    case random(UInt64, UInt64)

    var text: String? {
        switch self {
        case .none: nil
        case .given(let text): text
        case .random(let first, let second):
            String(unsafeUninitializedCapacity: uuidLength) { room in
                writeUUID(UnsafeMutableRawPointer(room.baseAddress!), first, second)
                return uuidLength
            }
        }
    }

    static func == (a: APNsIDValue, b: APNsIDValue) -> Bool {
        switch (a, b) {
        case (.none, .none): true
        case (.random(let a1, let a2), .random(let b1, let b2)): a1 == b1 && a2 == b2
        default: a.text == b.text
        }
    }

    func hash(into hasher: inout Hasher) {
        hasher.combine(text)
    }
}
