/// Why APNs refused a notification: every reason in Apple's provider API, and
/// what a sender must do about it (APNS-PROTOCOL.md, "Response").
public enum Reason: Sendable, Hashable, CustomStringConvertible {
    // 400
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    /// A topic-specific key (or a connection bound to an app's bundle ids) used for another bundle id.
    case topicMismatch
    // 400, broadcast channels (iOS 18)
    case missingChannelId, badChannelId, channelNotRegistered, cannotCreateChannelConfig, featureNotEnabled
    // 403
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden
    case invalidProviderToken, missingProviderToken, unrelatedKeyIdInToken
    case badEnvironmentKeyIdInToken, badEnvironmentKeyInToken
    // 404, 405, 410, 413
    case badPath, methodNotAllowed, unregistered, expiredToken, payloadTooLarge
    // 429, 500, 503
    case tooManyRequests, tooManyProviderTokenUpdates, internalServerError, serviceUnavailable, shutdown
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

    public init(rawValue: String) {
        self = Reason.byName[rawValue] ?? .unknown(rawValue)
    }

    public var rawValue: String {
        if case .unknown(let name) = self { return name }
        return Reason.byReason[self]!
    }

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
