import CAPNs

/// One broadcast push (iOS 18): a Live Activity update or end sent once to a
/// channel, which APNs fans out to every device subscribed to it. Checked when
/// made against APNs' rules for broadcasts (APNS-PROTOCOL.md, "Broadcast push").
public struct BroadcastNotification: Sendable, Hashable {
    /// `apns-priority`; nil sends no header.
    public let priority: Priority?
    /// 0 (`.immediately`) is the only value a no-storage channel takes.
    public let expiration: Expiration
    /// The body: a Live Activity `update` or `end` payload.
    public let payload: Payload

    /// Why a broadcast cannot be made: APNs would refuse it, or ActivityKit drop it.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The payload is larger than `Payload.broadcastLimit`.
        case payloadTooLarge(size: Int)
        /// The payload's `aps` breaks a Live Activity rule.
        case liveActivity(LiveActivity.Error)
        /// A broadcast updates or ends activities the devices started themselves.
        case cannotStart
        /// An expiration before 1970.
        case negativeExpiration

        /// One line saying what is wrong and what APNs accepts.
        public var description: String {
            switch self {
            case .payloadTooLarge(let size):
                "payload is \(size) bytes without white space; APNs accepts at most \(Payload.broadcastLimit) for a broadcast"
            case .liveActivity(let why): why.description
            case .cannotStart: "a broadcast can only update or end a Live Activity (aps.event update or end), not start one"
            case .negativeExpiration: "expiration must be a UNIX time in seconds, 0 or later"
            }
        }
    }

    /// A broadcast of `payload`, which must be a Live Activity `update` or `end` of at
    /// most `Payload.broadcastLimit` bytes; checked here.
    public init(priority: Priority? = nil, expiration: Expiration = .immediately,

                payload: Payload) throws(BroadcastNotification.Error) {
        guard payload.count <= Payload.broadcastLimit else { throw .payloadTooLarge(size: payload.count) }
        let event: LiveActivityEvent
        do throws(LiveActivity.Error) {
            event = try LiveActivity.check(payload)
        } catch {
            throw .liveActivity(error)
        }
        if event == .start { throw .cannotStart }
        if case .at(let seconds) = expiration, seconds < 0 { throw .negativeExpiration }
        self.priority = priority
        self.expiration = expiration
        self.payload = payload
    }

    /// The C message for `channelID` of `bundleID`, one reference for the caller.
    func makeCMessage(bundleID: String, channelID: String) -> OpaquePointer? {
        bundleID.withCString { bundle in
            channelID.withCString { channel in
                PushType.liveactivity.rawValue.withCString { pushType in
                    payload.bytes.withUnsafeBufferPointer { body in
                        var spec = capns_message_spec(
                            topic: bundle, push_type: pushType, priority: Int32(priority?.rawValue ?? 0),
                            expiration: expiration.headerValue, collapse_id: nil,
                            payload: body.baseAddress, payload_len: body.count, channel_id: channel)
                        return capns_message_create(&spec)
                    }
                }
            }
        }
    }
}
