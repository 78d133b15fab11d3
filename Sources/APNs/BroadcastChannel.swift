/// Broadcast channels (iOS 18): what a channel stores and what a channel
/// management call answers (APNS-PROTOCOL.md, "Broadcast push (iOS 18)").

/// `message-storage-policy`: what APNs keeps for a device that is offline.
public enum MessageStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// Nothing: every broadcast must have `apns-expiration: 0` (a higher publishing budget).
    case noMessageStored = 0
    /// The most recent broadcast.
    case mostRecentMessageStored = 1
}

/// One channel management call's answer. Every call ends in exactly one of these:
/// `status` 0 means no answer from APNs was obtained (`error` says why).
public struct ChannelResult: Sendable, Hashable {
    /// Which management call answered.
    public enum Operation: String, Sendable, Hashable {
        /// `BroadcastClient.createChannel(storagePolicy:)`.
        case create
        /// `BroadcastClient.readChannel(_:)`.
        case read
        /// `BroadcastClient.deleteChannel(_:)`.
        case delete
        /// `BroadcastClient.listChannels()`.
        case list
    }

    /// The call this answers.
    public let operation: Operation
    /// The HTTP status: 201 created, 200 read or listed, 204 deleted; 0 without an answer.
    public let status: Int
    /// APNs' reason when it refused the call, or a local one (`.badChannelId` for a
    /// malformed channel id, never sent).
    public let reason: Reason?
    /// `apns-request-id` of the answer.
    public let requestID: String?
    /// The channel: created (from `apns-channel-id`), or the one read or deleted.
    public let channelID: String?
    /// A read's `message-storage-policy`.
    public let storagePolicy: MessageStoragePolicy?
    /// A list's channel ids.
    public let channelIDs: [String]?
    /// Why there is no answer (status 0), or why the answer made no sense.
    public let error: String?

    /// True when APNs answered 2xx and the answer carried what the call asked for.
    public var isSuccess: Bool { (200..<300).contains(status) && error == nil }


    init(operation: Operation, status: Int, reason: Reason? = nil, requestID: String? = nil,
         channelID: String? = nil, storagePolicy: MessageStoragePolicy? = nil, channelIDs: [String]? = nil,
         error: String? = nil) {
        self.operation = operation
        self.status = status
        self.reason = reason
        self.requestID = requestID
        self.channelID = channelID
        self.storagePolicy = storagePolicy
        self.channelIDs = channelIDs
        self.error = error
    }
}

/// A channel id as APNs issues them: standard base64, at most 127 characters, so
/// it can travel in the `apns-channel-id` header as it is.
public func isChannelID(_ id: String) -> Bool {
    let b = Array(id.utf8)
    guard !b.isEmpty, b.count % 4 == 0, b.count < 128 else { return false }
    var padding = 0
    for c in b {
        if c == UInt8(ascii: "=") { padding += 1; continue }
        guard padding == 0 else { return false }
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "+"), UInt8(ascii: "/"): continue
        default: return false
        }
    }
    return padding <= 2
}
