/// Everything the mock APNs server is told at start: where it listens, whom it
/// trusts, and which faults it injects. The C header `capns_mock.h` documents the
/// order in which a request is judged; this type only carries the settings.
public struct MockConfiguration: Sendable {
    /// Numeric address to bind; anything but loopback needs `allowNonLoopback`.
    public var host = "127.0.0.1"
    /// 0 picks a free port; read the real one from `MockServer.port`.
    public var port: UInt16 = 0
    /// Allows `host` to be an address other than loopback: a mock reachable from other
    /// machines accepts any client that has its CA.
    public var allowNonLoopback = false
    /// The TLS certificate chain (PEM) the mock presents; clients must trust its CA.
    public var certificatePath: String
    /// The private key (PEM) of `certificatePath`'s certificate.
    public var privateKeyPath: String
    /// Provider keys the mock verifies JWTs with: key id ("kid") to a .p8 or public-key PEM path.
    public var authKeys: [String: String]
    /// Accepted JWT "iss" values.
    public var teamIDs: [String]
    /// The team each provider key signs for (key id to team id), as an APNs key belongs
    /// to one team: a token whose "iss" is another team is 403 InvalidProviderToken. A key
    /// not listed here belongs to the only team in `teamIDs` (with several, start fails).
    public var keyTeams: [String: String] = [:]
    /// Keys restricted to one environment (key id to environment), as APNs keys made
    /// since February 2025 may be: a token signed with one, sent to the other
    /// environment (see `sandbox`), is 403 BadEnvironmentKeyIdInToken. A key not
    /// listed serves both.
    public var keyEnvironments: [String: KeyEnvironment] = [:]
    /// Topic-specific keys (key id to the bundle ids it may push to): a push with one
    /// to another bundle id is 400 TopicMismatch. A key not listed is a team key.
    public var keyTopics: [String: [String]] = [:]
    /// Bundle ids; push-type suffixes (".voip", ...) are added by the mock.
    public var topics: [String]
    /// SETTINGS_MAX_CONCURRENT_STREAMS after a connection's first success.
    public var maxStreams = 1000
    /// ...and before it: 1, as APNs does with token auth. Tests whose client sends a
    /// burst before reading SETTINGS (nghttp) raise it to see every stream processed.
    public var initialStreams = 1
    /// Development environment: 200 answers carry `apns-unique-id`.
    public var sandbox = false
    /// Tokens answered 410 Unregistered, with the timestamp (ms) to report.
    public var unregistered: [String: Int64] = [:]
    /// Every answer waits `latency` plus a uniform share of `jitter`.
    public var latency: Duration = .zero
    /// The most added to `latency`, drawn uniformly per answer.
    public var jitter: Duration = .zero
    /// Fractions of otherwise-successful requests answered 429, 500 or 503.
    public var failureRates: [Int: Double] = [:]
    /// GOAWAY (NO_ERROR, last-stream-id = the Nth stream) when a connection's Nth request begins.
    public var goawayAfter: Int?
    /// TCP reset (SO_LINGER 0) when a connection's Nth request has arrived; it is never answered.
    public var resetAfter: Int?
    /// SETTINGS drop of the stream limit at runtime.
    public var settingsDrop: SettingsDrop?
    /// GOAWAY with debug data {"reason":"IdleTimeout"} after this long without a frame.
    public var idleTimeout: Duration?
    /// The "500 after long idle" quirk: the first answer after this long without one is 500.
    public var idle500After: Duration?
    /// A token change on a connection sooner than this is 429 TooManyProviderTokenUpdates
    /// (whole seconds; zero: no limit).
    public var tokenUpdateInterval: Duration = .seconds(20 * 60)
    /// Accept, handshake, read requests, never answer.
    public var stall = false
    /// Answer the first N requests (all connections together), then stall: a server
    /// that stops answering mid-run, its client left holding what it sent.
    public var stallAfter: Int?
    /// Never acknowledge a client's PING, while answering requests as usual.
    public var noPingAck = false
    /// The first valid provider token the mock sees runs out after this many requests
    /// used it (0: it is expired from the start): every later use is answered 403
    /// ExpiredProviderToken, as when a token's hour ends mid-batch. Nil: off.
    public var expireFirstProviderTokenAfter: Int?
    /// Keep every request (method, path, headers, body, arrival, decided answer) for
    /// `MockServer.recordedRequests()`.
    public var recordRequests = false
    /// At most this many requests are kept when recording.
    public var recordCap = 100_000
    /// Count every token's attempts (`attempts(for:)`). Off, only scripted and
    /// unregistered tokens are counted: a load test's millions of new tokens then
    /// cost no memory and almost no time (apns-mock, where nothing reads the counts).
    public var countsEveryToken = true
    /// Answers for a token's first attempts (after it passed validation), then normal handling.
    public var scripted: [String: [MockAnswer]] = [:]
    /// An answer for every attempt of a token after its script.
    public var forced: [String: MockAnswer] = [:]
    /// The mock's clock runs this far ahead of the machine's (negative: behind): it
    /// judges provider token ages by it and sends it as error answers' `date` header.
    public var clockOffset: Duration = .zero
    /// Seeds every random choice (faults, jitter, generated ids).
    public var seed: UInt64 = 0
    /// Event-loop threads (SO_REUSEPORT listeners).
    public var threads = 1
    /// Broadcast channels each bundle id may have (Apple's limit is 10,000); one more
    /// create is answered 400 CannotCreateChannelConfig.
    public var channelLimit = 10_000
    /// Off: every channel management and broadcast request is answered 400
    /// FeatureNotEnabled, as for an app without the broadcast capability.
    public var broadcastEnabled = true

    // Certificate auth (APNS-PROTOCOL.md, "Certificate-based trust").
    /// A CA (PEM): the mock asks every client for a TLS certificate and trusts the ones
    /// this CA issued. A request without an authorization header on a connection with a
    /// certificate is judged by it: 403 BadCertificate (untrusted, out of date, no Apple
    /// environment extension), 403 BadCertificateEnvironment (a development certificate
    /// on a production mock, or the reverse: see `sandbox`), 400 TopicDisallowed (a topic
    /// the certificate's UID, UID.voip, UID.complication or topic extension does not
    /// cover). Nil: token auth only.
    public var clientCA: String?

    /// The one environment a restricted provider key serves.
    public enum KeyEnvironment: String, Sendable, Equatable, CaseIterable {
        /// The development environment: `sandbox` on.
        case sandbox
        /// The production environment: `sandbox` off.
        case production
    }

    /// A change of the advertised stream limit in the middle of a connection, as APNs
    /// may make one: whether a client honours a lower limit, and ramps up again.
    public struct SettingsDrop: Sendable, Equatable {
        /// After this many requests began on a connection...
        public var after: Int
        /// ...advertise this many concurrent streams...
        public var to: Int
        /// ...and restore the limit this many requests later (nil: never).
        public var restoreAfter: Int?

        /// A drop to `to` streams after `after` requests, restored `restoreAfter` requests later.
        public init(after: Int, to: Int, restoreAfter: Int? = nil) {
            self.after = after
            self.to = to
            self.restoreAfter = restoreAfter
        }
    }

    /// A mock on 127.0.0.1 with a free port, no faults, and the given TLS identity,
    /// provider keys, teams and bundle ids; every other setting is changed on the value.
    public init(certificatePath: String, privateKeyPath: String, authKeys: [String: String] = [:],
                teamIDs: [String] = [], topics: [String] = []) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.authKeys = authKeys
        self.teamIDs = teamIDs
        self.topics = topics
    }
}

/// An answer the mock gives instead of judging a request itself.
public struct MockAnswer: Sendable, Equatable {
    /// HTTP status; 0 means "judge normally" (a scripted pass).
    public var status: Int
    /// APNs reason for an error body, nil for none.
    public var reason: String?
    /// 410's "timestamp" (ms since the epoch).
    public var timestamp: Int64?

    /// An answer with this status, reason and (for 410) timestamp.
    public init(status: Int, reason: String? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    /// Judge this attempt normally.
    public static let pass = MockAnswer(status: 0)
    /// 200, whatever the request.
    public static let success = MockAnswer(status: 200)
    /// 429 TooManyRequests, which a client retries after a backoff.
    public static let tooManyRequests = MockAnswer(status: 429, reason: "TooManyRequests")
    /// 500 InternalServerError, which a client retries after a backoff.
    public static let internalServerError = MockAnswer(status: 500, reason: "InternalServerError")
    /// 503 ServiceUnavailable, which a client retries after a backoff.
    public static let serviceUnavailable = MockAnswer(status: 503, reason: "ServiceUnavailable")
    /// Any status with an APNs reason, e.g. `.error(410, "Unregistered")`.
    public static func error(_ status: Int, _ reason: String) -> MockAnswer {

        MockAnswer(status: status, reason: reason)
    }
}
