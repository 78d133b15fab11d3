/// What happened to one token: the final answer, after any retries.
public struct DeliveryResult: Sendable, Hashable {
    /// The token as sent (lower-case hex), or the input line when it was malformed.
    public let token: String
    /// The apns-id of the notification (ours, echoed by APNs); nil when it was never sent.
    public let apnsID: String?
    /// `apns-unique-id`, which APNs sends in the development environment only.
    public let uniqueID: String?
    /// The HTTP status; 0 when no answer from APNs was obtained.
    public let status: Int
    /// APNs' reason, or a local one (`.badDeviceToken` for a malformed token).
    public let reason: Reason?
    /// For 410: when the token stopped being valid, in milliseconds since 1970.
    public let timestamp: Int64?
    /// How many times it was sent (0 when never).
    public let attempts: Int
    /// From the first send to the final answer.
    public let latency: Duration
    /// Why there is no answer from APNs (status 0): connection, TLS or deadline trouble;
    /// or, with APNs' answer, what to fix when it refused the configuration itself (a
    /// provider key restricted to the other environment: BadEnvironmentKeyIdInToken).
    public let error: String?

    public init(token: String, apnsID: String?, uniqueID: String? = nil, status: Int, reason: Reason?,
                timestamp: Int64? = nil, attempts: Int, latency: Duration = .zero, error: String? = nil) {
        self.token = token
        self.apnsID = apnsID
        self.uniqueID = uniqueID
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.attempts = attempts
        self.latency = latency
        self.error = error
    }

    public var isDelivered: Bool { status == 200 }
}
