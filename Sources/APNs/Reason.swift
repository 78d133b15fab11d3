/// Why APNs refused a notification: every reason in Apple's provider API, and
/// what a sender must do about it (APNS-PROTOCOL.md, "Response").
public enum Reason: Sendable, Hashable, CustomStringConvertible {
    // 400
    /// The collapse id is longer than 64 bytes.
    case badCollapseId
    /// The token is malformed, or belongs to the other environment (a development
    /// build's token sent to production, or the reverse).
    case badDeviceToken
    /// The expiration is malformed.
    case badExpirationDate
    /// The apns-id is not a canonical UUID.
    case badMessageId
    /// The priority is not 10, 5 or 1, or not one the push type takes.
    case badPriority
    /// The topic is malformed.
    case badTopic
    /// The token is not the topic's app's.
    case deviceTokenNotForTopic
    /// A header appeared twice.
    case duplicateHeaders
    /// The connection was idle too long (carried by a GOAWAY).
    case idleTimeout
    /// The push type is missing or unknown.
    case invalidPushType
    /// The path names no device token.
    case missingDeviceToken
    /// No topic, where the credentials cover more than one.
    case missingTopic
    /// The body is empty.
    case payloadEmpty
    /// The credentials may not push to this topic.
    case topicDisallowed
    /// A topic-specific key (or a connection bound to an app's bundle ids) used for another bundle id.
    case topicMismatch
    // 400, broadcast channels (iOS 18)
    /// A broadcast without an `apns-channel-id`.
    case missingChannelId
    /// The channel id is malformed.
    case badChannelId
    /// No such channel for this app in this environment.
    case channelNotRegistered
    /// The channel cannot be made: the app has as many channels as APNs allows.
    case cannotCreateChannelConfig
    /// The app lacks the broadcast capability.
    case featureNotEnabled
    // 403
    /// The client certificate is not valid.
    case badCertificate
    /// The client certificate is for the other environment.
    case badCertificateEnvironment
    /// The provider token is older than an hour: sign a new one and send again.
    case expiredProviderToken
    /// The action is not allowed.
    case forbidden
    /// The provider token is not valid, or not signed by the key and team it names.
    case invalidProviderToken
    /// No provider token and no client certificate.
    case missingProviderToken
    /// The connection is bound to another provider key.
    case unrelatedKeyIdInToken
    /// The provider key is restricted to the other environment.
    case badEnvironmentKeyIdInToken
    /// The provider key is restricted to the other environment.
    case badEnvironmentKeyInToken
    // 404, 405, 410, 413
    /// The path is not one APNs serves.
    case badPath
    /// The method is not POST.
    case methodNotAllowed
    /// The token is no longer active for the topic (410): the app was removed or its
    /// notifications turned off. Stop sending to it.
    case unregistered
    /// The token has expired (410). Stop sending to it.
    case expiredToken
    /// The payload is larger than the push type allows.
    case payloadTooLarge
    // 429, 500, 503
    /// Too many requests to one device token in a short time.
    case tooManyRequests
    /// The provider token was changed too often on one connection.
    case tooManyProviderTokenUpdates
    /// An internal error at APNs.
    case internalServerError
    /// APNs is unavailable for now.
    case serviceUnavailable
    /// The APNs server is shutting down.
    case shutdown
    /// A reason this version does not know; kept verbatim.
    case unknown(String)

    /// Every documented reason with its spelling on the wire.
    static let spellings: [(Reason, String)] = [
        (.badCollapseId, "BadCollapseId"), (.badDeviceToken, "BadDeviceToken"),
        (.badExpirationDate, "BadExpirationDate"), (.badMessageId, "BadMessageId"),
        (.badPriority, "BadPriority"), (.badTopic, "BadTopic"),
        (.deviceTokenNotForTopic, "DeviceTokenNotForTopic"), (.duplicateHeaders, "DuplicateHeaders"),
        (.idleTimeout, "IdleTimeout"), (.invalidPushType, "InvalidPushType"),
        (.missingDeviceToken, "MissingDeviceToken"), (.missingTopic, "MissingTopic"),
        (.payloadEmpty, "PayloadEmpty"), (.topicDisallowed, "TopicDisallowed"),
        (.topicMismatch, "TopicMismatch"),
        (.badCertificate, "BadCertificate"), (.badCertificateEnvironment, "BadCertificateEnvironment"),
        (.expiredProviderToken, "ExpiredProviderToken"), (.forbidden, "Forbidden"),
        (.invalidProviderToken, "InvalidProviderToken"), (.missingProviderToken, "MissingProviderToken"),
        (.unrelatedKeyIdInToken, "UnrelatedKeyIdInToken"),
        (.badEnvironmentKeyIdInToken, "BadEnvironmentKeyIdInToken"),
        (.badEnvironmentKeyInToken, "BadEnvironmentKeyInToken"),
        (.badPath, "BadPath"), (.methodNotAllowed, "MethodNotAllowed"),
        (.unregistered, "Unregistered"), (.expiredToken, "ExpiredToken"),
        (.payloadTooLarge, "PayloadTooLarge"), (.tooManyRequests, "TooManyRequests"),
        (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates"),
        (.internalServerError, "InternalServerError"), (.serviceUnavailable, "ServiceUnavailable"),
        (.shutdown, "Shutdown"),
        (.missingChannelId, "MissingChannelId"), (.badChannelId, "BadChannelId"),
        (.channelNotRegistered, "ChannelNotRegistered"),
        (.cannotCreateChannelConfig, "CannotCreateChannelConfig"), (.featureNotEnabled, "FeatureNotEnabled"),
    ]
    private static let byName = Dictionary(uniqueKeysWithValues: spellings.map { ($0.1, $0.0) })
    private static let byReason = Dictionary(uniqueKeysWithValues: spellings.map { ($0.0, $0.1) })

    /// The reason spelled `rawValue` on the wire (`"BadDeviceToken"`); `.unknown` for
    /// any other spelling.
    public init(rawValue: String) {
        self = Reason.byName[rawValue] ?? .unknown(rawValue)
    }

    /// The reason as APNs spells it in its JSON body.
    public var rawValue: String {
        if case .unknown(let name) = self { return name }
        return Reason.byReason[self]!
    }

    /// `rawValue`.
    public var description: String { rawValue }

    /// True for answers that end a token's delivery: never sent again for the same token.
    public var isFinal: Bool { Disposition(status: 0, reason: self) == .final }

    /// True when the token itself is dead (410): stop sending to it.
    public var deactivatesToken: Bool { self == .unregistered || self == .expiredToken }
}

/// What the sender does with one answer (APNS-PROTOCOL.md, "what a sender does").
enum Disposition: Equatable {
    /// Delivered, or refused for good: never send the same token again.
    case final
    /// Transient: send again after a backoff (429, 500, 503).
    case retryAfterBackoff
    /// 403 ExpiredProviderToken: sign a new provider token once, then send again.
    case refreshTokenAndRetry
    /// 403 UnrelatedKeyIdInToken: the connection belongs to another key; send again
    /// once, on a fresh connection (the transport retires the one that answered).
    case resendOnFreshConnection
    /// 403 BadEnvironmentKeyIdInToken (or BadEnvironmentKeyInToken): the provider key
    /// is restricted to the other environment. A configuration error: no retry mends
    /// it, and every request of that key ends at once.
    case keyRefused

    init(status: Int, reason: Reason?) {
        switch (status, reason) {
        case (403, .expiredProviderToken?): self = .refreshTokenAndRetry
        case (403, .unrelatedKeyIdInToken?): self = .resendOnFreshConnection
        case (403, .badEnvironmentKeyIdInToken?), (403, .badEnvironmentKeyInToken?): self = .keyRefused
        case (429, _), (500, _), (503, _): self = .retryAfterBackoff
        // A reason whose status we lost still tells what to do.
        case (_, .tooManyRequests?), (_, .tooManyProviderTokenUpdates?), (_, .internalServerError?),
             (_, .serviceUnavailable?), (_, .shutdown?):
            self = .retryAfterBackoff
        case (_, .expiredProviderToken?): self = .refreshTokenAndRetry
        default: self = .final
        }
    }
}
