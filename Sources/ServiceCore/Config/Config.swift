import APNs
import Foundation
import Store

/// apns-server's configuration: what the service runs with, once read and checked
/// (see ConfigReading.swift: the YAML file and the environment's overrides).
public struct ServerConfig: Sendable {
    public var listenHost: String
    public var listenPort: Int
    /// Where the state (registry, outbox, log) lives: one SQLite file, or a
    /// PostgreSQL database that several instances share.
    public var database: Database
    /// Backend API keys: each one's name, role and apps, and its secret (compared in
    /// constant time).
    package var apiKeys: [APIKeyFile.Entry]
    /// The apps' HS256 secret.
    package var userJWTSecret: [UInt8]
    /// `user_jwt: {audience, issuer}`: the `aud` and `iss` a user's token must carry.
    package var userJWTClaims = UserJWTClaims()
    /// Lines for the log once it is set up (a secret file others can read): worth
    /// saying, not worth refusing to start.
    package var warnings: [String] = []
    public var apps: [AppConfig]
    public var worker: WorkerConfig
    public var retention = RetentionConfig()
    /// Signed webhooks: who hears of which events, and how hard the worker tries.
    public var webhooks = WebhookConfig()
    /// A user's active tokens per app (device tokens and Live Activity tokens each):
    /// a registration beyond it deactivates the user's oldest.
    public var maxTokensPerUser = 20
    /// Largest request body; a larger one is answered 413 without being read.
    public var maxBodyBytes: Int
    /// A connection that sends nothing for this long is closed (slow clients).
    public var idleTimeoutSeconds: Int
    public var logLevel: String
    /// `log_format`: "text" (swift-log's lines) or "json" (`JSONLogHandler`: one object a line).
    public var logFormat = "text"

    // Connections, shutdown and /metrics (see `ConnectionGuard`, `ShutdownGrace`, `OpsRoutes`).
    /// A request, head and body, must arrive within this long of its first byte,
    /// however it trickles (the idle timeout covers a connection between requests).
    public var requestTimeoutSeconds = 30
    /// Open connections from one client address, at most; one more is closed at once.
    public var maxConnectionsPerAddress = 64
    /// Open connections in all; past it the server stops accepting until one closes.
    public var maxConnections = 4096
    /// On SIGTERM, how long the drain may take; what APNs has not answered by then
    /// goes back to the outbox for the next process, and the exit is 0.
    public var shutdownGraceSeconds = 25
    /// Past the grace, how long writing the unanswered back to the outbox may take
    /// before the process exits anyway (their leases then cover them). A hang guard:
    /// the write-back takes milliseconds on a machine with CPU to spare.
    public var shutdownWriteBackSeconds = 10
    /// A bearer token `/metrics` accepts besides the API keys (for a scraper that
    /// should not hold an API key); nil: the API keys only.
    package var metricsToken: [UInt8]?
    /// How often the outbox gauges of `/metrics` are counted (never per scrape).
    public var metricsRefreshMillis = 5000
    /// The support console at `/console` (static pages on the API); false: no such path.
    public var console = true

    public struct WorkerConfig: Sendable {
        /// Deliveries one claim takes.
        public var batchSize = 1000
        /// Claim loops running at once (each its own worker id), so that one batch's
        /// store writes overlap another's sends.
        public var concurrency = 2
        public var leaseSeconds = 30
        /// A fan-out is read, planned and written this many users at a time: what it
        /// holds in memory (see `FanOut`).
        public var fanOutPart = 5000
        /// How often an idle worker looks at the outbox (an enqueue wakes it at once).
        public var pollIntervalMillis = 250
        /// A delivery APNs never answered (or answered 429/500/503 through every
        /// engine retry) goes back to the outbox this many times, then fails.
        public var maxAttempts = 25
        /// Backoff before such a delivery is tried again: base × 2^attempts, capped.
        public var backoffBaseMillis = 1000
        public var backoffMaxMillis = 300_000
        /// Deliveries handed from enqueues to one loop and not yet taken, at most;
        /// past it a fan-out leaves them to ordinary claims (0: never hand over).
        public var handoffLimit = 20_000
    }

    /// How long the delivery log keeps what is finished.
    public struct RetentionConfig: Sendable {
        /// Notifications (with their deliveries) and broadcasts older than this, once
        /// final, are deleted; 0 keeps everything.
        public var days = 30
        /// How often the pruner looks (and once at start).
        public var intervalSeconds = 3600
        /// Tokens deactivated (logout, a 410, replaced) longer ago than this are
        /// deleted; 0 keeps them.
        public var inactiveDeviceDays = 90
    }

    /// `idempotency.retention_hours`: how long an `Idempotency-Key`'s answer is kept.
    public var idempotencyRetentionHours = 24
    /// `schedule.horizon_days`: how far ahead a `send_at` may be.
    public var scheduleHorizonDays = 30

    public func app(_ appType: String) -> AppConfig? { apps.first { $0.appType == appType } }

    /// `sqlite:PATH` (one instance) or `postgres://USER[:PASSWORD]@HOST[:PORT]/DB`
    /// (several instances on one database).
    /// SQLite's `durability`: config `sqlite_synchronous` (normal: `.processCrash`, full: `.powerLoss`).
    public typealias Database = StoreLocation
}

/// One iOS app: its topic, the key that signs for it, where its pushes go, and
/// how notification types map to its preference keys.
public struct AppConfig: Sendable {
    public var appType: String
    public var topic: String
    public var keyPath: String
    public var keyID: String
    public var teamID: String
    public var sandboxEndpoint: Endpoint?
    public var productionEndpoint: Endpoint?
    public var caFile: String?
    /// Notification type → preference key (nil: the master toggle alone), in config order.
    public var preferenceByType: [(type: String, key: String?)]
    /// The app's preference keys, each once, in config order (what GET answers after
    /// `notificationsEnabled`).
    public var preferenceKeys: [String]
    /// Loaded once at start, so an unreadable key fails the start, not the first send.
    public var credentials: Credentials
    /// What a notification in a user's quiet hours does (silent unless configured).
    public var quietHours: QuietHoursMode = .silent
    /// The config names `quiet_hours`: GET lists the quiet-hours keys for every user
    /// (elsewhere only once a user saved one, so the seed's answers stay its own).
    public var quietHoursDeclared = false
    /// Per notification type: critical (ignores quiet hours) and batching.
    public var types: [String: TypeRule] = [:]
    /// Where broadcast channels are managed, per environment; nil: Apple's
    /// (`api-manage-broadcast[.sandbox].push.apple.com`).
    public var broadcastManagementEndpoint: Endpoint?
    public var broadcastSandboxManagementEndpoint: Endpoint?

    public struct TypeRule: Sendable {
        /// Like a notification sent with `"priority":"critical"`: quiet hours do not hold it.
        public var critical = false
        public var coalesce: CoalesceRule?
    }

    public static let masterKey = "notificationsEnabled"

    public func preferenceKey(for type: String) -> String? {
        preferenceByType.first { $0.type == type }?.key
    }

    /// A client serves every app with the same key and endpoints.
    package var clientKey: String {
        [keyPath, keyID, teamID, sandboxEndpoint?.description ?? "", productionEndpoint?.description ?? "",
         caFile ?? ""].joined(separator: "\u{0}")
    }
}

public struct ConfigError: Error, CustomStringConvertible {
    public let description: String
    package init(_ description: String) { self.description = description }
}
