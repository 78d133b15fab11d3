import APNs
import Foundation
import Store
import Yams

// apns-server's configuration as it is read: a YAML file (JSON is YAML too), some
// values of which the environment overrides (`ServerConfig.environmentVariables`).
// Loading checks everything a running server would trip over later (files, keys,
// ids, endpoints), so a bad config fails at start with one clear line, never mid-run.

extension ServerConfig {
    /// The variables that override the file's values. Paths they give are relative
    /// to the working directory; paths in the file are relative to the file.
    public static let environmentVariables: [(name: String, key: String)] = [
        ("APNS_SERVER_LISTEN", "listen"),
        ("APNS_SERVER_DATABASE", "database"),
        ("APNS_SERVER_API_KEYS_FILE", "api_keys_file"),
        ("APNS_SERVER_USER_JWT_SECRET_FILE", "user_jwt_secret_file"),
        ("APNS_SERVER_MAX_BODY_BYTES", "max_body_bytes"),
        ("APNS_SERVER_LOG_LEVEL", "log_level"),
        ("APNS_SERVER_LOG_FORMAT", "log_format"),
        ("APNS_SERVER_BATCH_SIZE", "worker.batch_size"),
        ("APNS_SERVER_WORKERS", "worker.concurrency"),
        ("APNS_SERVER_LEASE_SECONDS", "worker.lease_seconds"),
        ("APNS_SERVER_POLL_INTERVAL_MS", "worker.poll_interval_ms"),
    ]
}

extension ServerConfig {
    /// Reads `path`, applies `environment`'s overrides, loads every referenced file.
    public static func load(path: String, environment: [String: String]) throws(ConfigError) -> ServerConfig {
        let text: String
        switch Self.contents(of: path) {
        case .success(let bytes):
            guard let valid = String(validating: bytes, as: UTF8.self) else {
                throw ConfigError("cannot read config file \(path): it is not UTF-8 text")
            }
            text = valid
        case .failure(let why): throw ConfigError("cannot read config file \(path): \(why.message)")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch {
            throw ConfigError("config file \(path) is not valid YAML: \(String(describing: error).split(separator: "\n").first ?? "")")
        }
        guard let root, let mapping = root.mapping else {
            throw ConfigError("config file \(path) must be a mapping (key: value lines, or a JSON object)")
        }
        let base = URL(fileURLWithPath: path).deletingLastPathComponent()
        var reader = Reader(mapping: mapping, context: "", base: base)
        var overrides: [String: String] = [:]
        for (name, key) in environmentVariables {
            if let value = environment[name], !value.isEmpty { overrides[key] = value }
        }
        let cwd = URL(fileURLWithPath: FileManager.default.currentDirectoryPath)

        // A value from the environment wins; its relative paths are the shell's.
        func string(_ key: String, required: Bool) throws(ConfigError) -> String? {
            if let v = overrides[key] { _ = reader.take(key); return v }
            return try reader.string(key, required: required)
        }
        func filePath(_ key: String) throws(ConfigError) -> String {
            if let v = overrides[key] { _ = reader.take(key); return resolve(v, against: cwd) }
            return resolve(try reader.string(key, required: true)!, against: base)
        }
        func int(_ key: String, _ sub: inout Reader?, _ subKey: String, default value: Int, range: ClosedRange<Int>)
            throws(ConfigError) -> Int
        {
            if let v = overrides[key] {
                _ = sub?.take(subKey)
                guard let n = Int(v), range.contains(n) else {
                    throw ConfigError("\(key) from the environment must be an integer in \(range.lowerBound)...\(range.upperBound), not '\(v)'")
                }
                return n
            }
            guard sub != nil else { return value }
            return try sub!.int(subKey, default: value, range: range)
        }

        let listen = try string("listen", required: true)!
        let (host, port) = try parseListen(listen)
        let database = try string("database", required: true)!
        var parsedDatabase = try parseDatabase(database, base: overrides["database"] != nil ? cwd : base)
        let apiKeysPath = try filePath("api_keys_file"), secretPath = try filePath("user_jwt_secret_file")
        let secret = try readSecret(secretPath)

        var topLevel: Reader? = reader
        let maxBody = try int("max_body_bytes", &topLevel, "max_body_bytes", default: 65536, range: 1024...16_777_216)
        reader.used.formUnion(topLevel!.used)
        let idle = try reader.int("idle_timeout_seconds", default: 30, range: 1...3600)
        let logLevel = try string("log_level", required: false) ?? "info"
        guard ["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(logLevel) else {
            throw ConfigError("log_level must be one of trace, debug, info, notice, warning, error, critical, not '\(logLevel)'")
        }
        let logFormat = try string("log_format", required: false) ?? "text"
        guard ["text", "json"].contains(logFormat) else {
            throw ConfigError("log_format must be text or json, not '\(logFormat)'")
        }

        var worker = WorkerConfig()
        var w: Reader? = try reader.mapping("worker")
        worker.batchSize = try int("worker.batch_size", &w, "batch_size", default: worker.batchSize, range: 1...100_000)
        worker.concurrency = try int("worker.concurrency", &w, "concurrency", default: worker.concurrency, range: 1...64)
        worker.leaseSeconds = try int("worker.lease_seconds", &w, "lease_seconds", default: worker.leaseSeconds, range: 1...86_400)
        worker.pollIntervalMillis = try int("worker.poll_interval_ms", &w, "poll_interval_ms",
                                            default: worker.pollIntervalMillis, range: 1...60_000)
        if w != nil {
            worker.fanOutPart = try w!.int("fan_out_part", default: worker.fanOutPart, range: 100...1_000_000)
            worker.maxAttempts = try w!.int("max_attempts", default: worker.maxAttempts, range: 1...1000)
            worker.backoffBaseMillis = try w!.int("backoff_base_ms", default: worker.backoffBaseMillis, range: 0...3_600_000)
            worker.backoffMaxMillis = try w!.int("backoff_max_ms", default: worker.backoffMaxMillis, range: 0...86_400_000)
            worker.handoffLimit = try w!.int("handoff_limit", default: worker.handoffLimit, range: 0...10_000_000)
            try w!.rejectUnknown()
        }

        var retention = RetentionConfig()
        if var r = try reader.mapping("retention") {
            retention.days = try r.int("days", default: retention.days, range: 0...36_500)
            retention.intervalSeconds = try r.int("interval_seconds", default: retention.intervalSeconds, range: 1...86_400)
            retention.inactiveDeviceDays = try r.int("inactive_device_days", default: retention.inactiveDeviceDays,
                                                     range: 0...36_500)
            try r.rejectUnknown()
        }

        var idempotencyHours = 24, horizonDays = 30
        if var i = try reader.mapping("idempotency") {
            idempotencyHours = try i.int("retention_hours", default: idempotencyHours, range: 1...8_760)
            try i.rejectUnknown()
        }
        if var s = try reader.mapping("schedule") {
            horizonDays = try s.int("horizon_days", default: horizonDays, range: 1...3_650)
            try s.rejectUnknown()
        }

        guard let appNodes = reader.take("apps") else { throw ConfigError("config: apps is required (a list of apps)") }
        guard let list = appNodes.sequence, !list.isEmpty else {
            throw ConfigError("config: apps must be a non-empty list of apps")
        }
        var apps: [AppConfig] = []
        for (i, node) in list.enumerated() {
            guard let m = node.mapping else { throw ConfigError("config: apps[\(i)] must be a mapping") }
            let app = try parseApp(Reader(mapping: m, context: "apps[\(i)].", base: base))
            guard !apps.contains(where: { $0.appType == app.appType }) else {
                throw ConfigError("config: app_type '\(app.appType)' appears twice in apps")
            }
            apps.append(app)
        }
        let poolSize = try reader.int("database_pool_size", default: 10, range: 1...1000)
        let maxTokensPerUser = try reader.int("max_tokens_per_user", default: 20, range: 1...10_000)
        if case .postgres(var c) = parsedDatabase {
            c.maximumConnections = poolSize
            parsedDatabase = .postgres(c)
        }
        // The SQLite file's durability, and the user JWT's expected claims.
        if let synchronous = try reader.string("sqlite_synchronous", required: false) {
            guard case .sqlite(let path, _) = parsedDatabase else {
                throw ConfigError("config: sqlite_synchronous is for a sqlite: database (PostgreSQL has its own synchronous_commit)")
            }
            switch synchronous {
            case "normal": parsedDatabase = .sqlite(path: path, durability: .processCrash)
            case "full": parsedDatabase = .sqlite(path: path, durability: .powerLoss)
            default: throw ConfigError("config: sqlite_synchronous must be normal or full, not '\(synchronous)'")
            }
        }
        var claims = UserJWTClaims()
        if var j = try reader.mapping("user_jwt") {
            claims.audience = try j.string("audience", required: false)
            claims.issuer = try j.string("issuer", required: false)
            for (key, value) in [("audience", claims.audience), ("issuer", claims.issuer)] where value?.isEmpty == true {
                throw ConfigError("config: user_jwt.\(key) must not be empty (leave it out not to check it)")
            }
            try j.rejectUnknown()
        }
        let requestTimeout = try reader.int("request_timeout_seconds", default: 30, range: 1...3600)
        let perAddress = try reader.int("max_connections_per_address", default: 64, range: 1...1_000_000)
        let maxConnections = try reader.int("max_connections", default: 4096, range: 1...1_000_000)
        let grace = try reader.int("shutdown_grace_seconds", default: 25, range: 1...3600)
        let writeBack = try reader.int("shutdown_write_back_seconds", default: 10, range: 1...3600)
        let metricsRefresh = try reader.int("metrics_refresh_ms", default: 5000, range: 10...3_600_000)
        var metricsToken: [UInt8]?
        var metricsTokenPath: String?
        if let file = try reader.string("metrics_token_file", required: false) {
            metricsTokenPath = resolve(file, against: base)
            metricsToken = try readMetricsToken(metricsTokenPath!)
        }
        let webhooks = try parseWebhooks(&reader)
        let console = try reader.bool("console", default: true)
        try reader.rejectUnknown()

        let apiKeys = try APIKeyFile.read(apiKeysPath, apps: apps.map(\.appType))
        var config = ServerConfig(listenHost: host, listenPort: port, database: parsedDatabase, apiKeys: apiKeys,
                                  userJWTSecret: secret, apps: apps, worker: worker, maxBodyBytes: maxBody,
                                  idleTimeoutSeconds: idle, logLevel: logLevel)
        config.logFormat = logFormat
        config.retention = retention
        config.idempotencyRetentionHours = idempotencyHours
        config.scheduleHorizonDays = horizonDays
        config.maxTokensPerUser = maxTokensPerUser
        config.userJWTClaims = claims
        var secretFiles: [String] = []
        let secretPaths = [apiKeysPath, secretPath] + [metricsTokenPath].compactMap { $0 } + apps.map(\.keyPath)
            + webhooks.endpoints.map(\.secretPath)
        for path in secretPaths where !secretFiles.contains(path) { secretFiles.append(path) }
        config.warnings = secretFiles.compactMap(Self.openToOthers) + webhooks.warnings
        config.requestTimeoutSeconds = requestTimeout
        config.maxConnectionsPerAddress = perAddress
        config.maxConnections = maxConnections
        config.shutdownGraceSeconds = grace
        config.shutdownWriteBackSeconds = writeBack
        config.metricsRefreshMillis = metricsRefresh
        config.metricsToken = metricsToken
        config.webhooks = webhooks
        config.console = console
        return config
    }

    /// A key, API-key or secret file that group or others may read or change: the
    /// warning to log (as apns-send says of a provider key), nil when owner-only.
    static func openToOthers(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
        let mode = String(info.st_mode & 0o777, radix: 8)
        return "\(path) is readable by group or others (mode \(mode)); chmod 600 it"
    }

    private static func parseApp(_ r: Reader) throws(ConfigError) -> AppConfig {
        var r = r
        let appType = try r.string("app_type", required: true)!
        guard !appType.isEmpty, appType.utf8.count <= 64, appType.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError("config: \(r.context)app_type must be 1 to 64 printable characters without spaces")
        }
        let topic = try r.string("topic", required: true)!
        guard !topic.isEmpty, topic.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else {
            throw ConfigError("config: \(r.context)topic must be a bundle id (printable, no spaces)")
        }
        let keyPath = resolve(try r.string("key", required: true)!, against: r.base)
        let keyID = try r.string("key_id", required: true)!
        let teamID = try r.string("team_id", required: true)!
        let key: SigningKey
        do {
            key = try SigningKey(contentsOf: keyPath)
        } catch {
            // The loader's message names the file and the problem, never key bytes.
            throw ConfigError("config: \(r.context)key: cannot load \(keyPath): \(error.description)")
        }
        let credentials: Credentials
        do {
            credentials = try Credentials(key: key, keyID: keyID, teamID: teamID)
        } catch {
            throw ConfigError("config: \(r.context)\(error.description)")
        }
        let sandbox = try r.string("sandbox_endpoint", required: false).map { (s) throws(ConfigError) in
            try parseEndpoint(s, field: "\(r.context)sandbox_endpoint")
        }
        let production = try r.string("production_endpoint", required: false).map { (s) throws(ConfigError) in
            try parseEndpoint(s, field: "\(r.context)production_endpoint")
        }
        var caFile: String?
        if let ca = try r.string("cacert", required: false) {
            let p = resolve(ca, against: r.base)
            guard FileManager.default.isReadableFile(atPath: p) else {
                throw ConfigError("config: \(r.context)cacert: cannot read \(p)")
            }
            caFile = p
        }
        var byType: [(type: String, key: String?)] = []
        var keys: [String] = []
        if let prefs = r.take("preferences") {
            if prefs.null == nil {
                guard let m = prefs.mapping else {
                    throw ConfigError("config: \(r.context)preferences must be a mapping of notification type to preference key")
                }
                for (k, v) in m {
                    guard let type = k.scalar?.string, !type.isEmpty else {
                        throw ConfigError("config: \(r.context)preferences: a notification type must be a string")
                    }
                    guard !byType.contains(where: { $0.type == type }) else {
                        throw ConfigError("config: \(r.context)preferences: type '\(type)' appears twice")
                    }
                    if v.null != nil {
                        byType.append((type, nil))  // governed by the master toggle alone
                        continue
                    }
                    guard let key = v.scalar?.string, v.scalar?.style == .plain || v.scalar?.style == .doubleQuoted
                        || v.scalar?.style == .singleQuoted, !key.isEmpty, key.utf8.count <= 64,
                        key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != 0x22 && $0 != 0x5c })
                    else {
                        throw ConfigError("config: \(r.context)preferences.\(type) must be a preference key (a word) or null")
                    }
                    guard key != AppConfig.masterKey else {
                        throw ConfigError("config: \(r.context)preferences.\(type): \(AppConfig.masterKey) is the master toggle, not a type's key")
                    }
                    byType.append((type, key))
                    if !keys.contains(key) { keys.append(key) }
                }
            }
        }
        var quietHours = QuietHoursMode.silent
        let quietHoursValue = try r.string("quiet_hours", required: false)
        if let quietHoursValue {
            guard let mode = QuietHoursMode(rawValue: quietHoursValue) else {
                throw ConfigError("config: \(r.context)quiet_hours must be silent or defer, not '\(quietHoursValue)'")
            }
            quietHours = mode
        }
        let types = try parseTypes(&r)
        let management = try r.string("broadcast_management_endpoint", required: false).map { (s) throws(ConfigError) in
            try parseEndpoint(s, field: "\(r.context)broadcast_management_endpoint")
        }
        let sandboxManagement = try r.string("broadcast_sandbox_management_endpoint", required: false)
            .map { (s) throws(ConfigError) in
                try parseEndpoint(s, field: "\(r.context)broadcast_sandbox_management_endpoint")
            }
        try r.rejectUnknown()
        var app = AppConfig(appType: appType, topic: topic, keyPath: keyPath, keyID: keyID, teamID: teamID,
                            sandboxEndpoint: sandbox, productionEndpoint: production, caFile: caFile,
                            preferenceByType: byType, preferenceKeys: keys, credentials: credentials)
        app.quietHours = quietHours
        app.quietHoursDeclared = quietHoursValue != nil
        app.types = types
        app.broadcastManagementEndpoint = management
        app.broadcastSandboxManagementEndpoint = sandboxManagement
        for key in QuietHours.keys where keys.contains(key) {
            throw ConfigError("config: \(r.context)preferences: \(key) is a quiet-hours key, not a type's toggle")
        }
        return app
    }

    /// `types: {TYPE: {critical: true, coalesce: {window_seconds: N, summary: "…"}}}`
    private static func parseTypes(_ r: inout Reader) throws(ConfigError) -> [String: AppConfig.TypeRule] {
        guard var typesReader = try r.mapping("types") else { return [:] }
        var rules: [String: AppConfig.TypeRule] = [:]
        for (k, v) in typesReader.mapping {
            guard let type = k.scalar?.string, !type.isEmpty, type.utf8.count <= 64 else {
                throw ConfigError("config: \(typesReader.context): a notification type must be a string of 1 to 64 characters")
            }
            _ = typesReader.take(type)
            guard let m = v.mapping else {
                throw ConfigError("config: \(typesReader.context)\(type) must be a mapping (critical, coalesce)")
            }
            var t = Reader(mapping: m, context: "\(typesReader.context)\(type).", base: r.base)
            var rule = AppConfig.TypeRule()
            rule.critical = try t.bool("critical", default: false)
            if var c = try t.mapping("coalesce") {
                guard c.mapping["window_seconds"] != nil else {
                    throw ConfigError("config: \(c.context)window_seconds is required (the batching window, 1 to 86400 seconds)")
                }
                let window = try c.int("window_seconds", default: 0, range: 1...86_400)
                var summary: SummaryTemplate?
                if let text = try c.string("summary", required: false) {
                    switch SummaryTemplate.parse(text) {
                    case .success(let template): summary = template
                    case .failure(let invalid): throw ConfigError("config: \(c.context)summary: \(invalid.why)")
                    }
                }
                try c.rejectUnknown()
                rule.coalesce = CoalesceRule(windowSeconds: window, summary: summary)
            }
            try t.rejectUnknown()
            rules[type] = rule
        }
        return rules
    }

    static func parseListen(_ s: String) throws(ConfigError) -> (String, Int) {
        guard let colon = s.lastIndex(of: ":"), let port = Int(s[s.index(after: colon)...]), (0...65535).contains(port)
        else { throw ConfigError("listen must be HOST:PORT (e.g. 127.0.0.1:8080), not '\(s)'") }
        var host = String(s[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ConfigError("listen must be HOST:PORT (e.g. 127.0.0.1:8080), not '\(s)'") }
        return (host, port)
    }

    package static func parseDatabase(_ s: String, base: URL) throws(ConfigError) -> Database {
        if s.hasPrefix("postgres://") || s.hasPrefix("postgresql://") {
            do {
                var configuration = try StoreLocation.PostgresConfiguration(url: s)
                configuration.caFile = configuration.caFile.map { resolve($0, against: base) }
                try configuration.checkTLS()
                return .postgres(configuration)
            } catch {
                // "database URL: no user (expected postgres://…)": never the password.
                throw ConfigError("config: \(error.description)")
            }
        }
        guard s.hasPrefix("sqlite:"), s.count > "sqlite:".count else {
            throw ConfigError("database must be sqlite:PATH or postgres://USER@HOST:PORT/DB, not '\(Self.redacted(s))'")
        }
        var p = String(s.dropFirst("sqlite:".count))
        if p.hasPrefix("//") { p = String(p.dropFirst(2)) }  // sqlite:///abs/path
        return .sqlite(path: resolve(p, against: base), durability: .processCrash)
    }

    /// A database value as an error may quote it, whatever its shape: a password
    /// sits between the scheme and an "@" (`postgres://u:pw@h`, `postgres:u:pw@h`,
    /// `postgres//u:pw@h`), so all of that is left out; and with no "@" at all, a ":"
    /// after the scheme may still start one (`postgres://u:pw/db`), so then nothing
    /// after the scheme is quoted.
    static func redacted(_ s: String) -> String {
        // "postgres:", "postgres://", "postgres:/": a scheme word and the slashes after it.
        var scheme = s.startIndex
        if let colon = s.firstIndex(of: ":"), colon > s.startIndex,
           s[..<colon].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+.-".contains($0)) }) {
            scheme = s.index(after: colon)
            while scheme < s.endIndex, s[scheme] == "/" { scheme = s.index(after: scheme) }
        }
        if let at = s.lastIndex(of: "@") {
            return String(s[..<min(scheme, at)]) + "…" + String(s[at...])
        }
        return s[scheme...].contains(":") ? String(s[..<scheme]) + "…" : s
    }

    static func parseEndpoint(_ s: String, field: String) throws(ConfigError) -> Endpoint {
        guard s.hasPrefix("https://") else {
            throw ConfigError("config: \(field) must be https://HOST:PORT (TLS is always on), not '\(s)'")
        }
        var rest = Substring(s.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (1...65535).contains(port), colon > rest.startIndex
        else { throw ConfigError("config: \(field) must be https://HOST:PORT, not '\(s)'") }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return Endpoint(host: host, port: port)
    }

    static func readSecret(_ path: String) throws(ConfigError) -> [UInt8] {
        var bytes: [UInt8]
        switch contents(of: path) {
        case .success(let read): bytes = read
        case .failure(let why): throw ConfigError("user_jwt_secret_file: cannot read \(path): \(why.message)")
        }
        while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
        guard bytes.count >= 32 else {
            throw ConfigError("user_jwt_secret_file: the secret in \(path) is shorter than 32 bytes (HS256 wants at least 256 bits)")
        }
        return bytes
    }

    /// The token of `metrics_token_file`: one line, 16 bytes or more.
    static func readMetricsToken(_ path: String) throws(ConfigError) -> [UInt8] {
        var bytes: [UInt8]
        switch contents(of: path) {
        case .success(let read): bytes = read
        case .failure(let why): throw ConfigError("metrics_token_file: cannot read \(path): \(why.message)")
        }
        while let last = bytes.last, last == 0x0A || last == 0x0D || last == 0x20 { bytes.removeLast() }
        guard bytes.count >= 16, !bytes.contains(0x0A) else {
            throw ConfigError("metrics_token_file: \(path) must hold one token of 16 characters or more")
        }
        return bytes
    }

    static func resolve(_ path: String, against base: URL) -> String {
        path.hasPrefix("/") ? path : base.appendingPathComponent(path).standardizedFileURL.path
    }

    /// Why a file could not be read: the C library's words for `errno`.
    struct Unreadable: Error {
        let message: String
    }

    /// A file's bytes, read with open(2) and read(2) to its end. Foundation's readers
    /// refuse what is not a regular file ("permission denied" for a readable pipe), and
    /// `--config <(…)` or a secret from a process substitution is a pipe.
    static func contents(of path: String, limit: Int = 16 << 20) -> Result<[UInt8], Unreadable> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Unreadable(message: errnoText(errno))) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(Unreadable(message: errnoText(errno)))
            }
            if n == 0 { return .success(bytes) }
            bytes.append(contentsOf: chunk[0..<n])
            guard bytes.count <= limit else { return .failure(Unreadable(message: "larger than \(limit >> 20) MiB")) }
        }
    }

    private static func errnoText(_ code: Int32) -> String {
        code == ENOENT ? "no such file" : code == EACCES ? "permission denied" : String(cString: strerror(code))
    }

    static func why(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoSuchFileError { return "no such file" }
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoPermissionError { return "permission denied" }
        return ns.localizedDescription
    }
}

/// Reads one YAML mapping, remembering which keys were used so that a misspelled
/// key is an error rather than a silently ignored setting.
struct Reader {
    let mapping: Node.Mapping
    let context: String
    let base: URL
    var used: Set<String> = []

    init(mapping: Node.Mapping, context: String, base: URL) {
        self.mapping = mapping
        self.context = context
        self.base = base
    }

    mutating func take(_ key: String) -> Node? {
        used.insert(key)
        return mapping[key]
    }

    mutating func string(_ key: String, required: Bool) throws(ConfigError) -> String? {
        guard let node = take(key), node.null == nil || node.scalar?.style != .plain else {
            if required { throw ConfigError("config: \(context)\(key) is required") }
            return nil
        }
        guard let scalar = node.scalar else {
            throw ConfigError("config: \(context)\(key) must be a string, not a \(node.mapping != nil ? "mapping" : "list")")
        }
        return scalar.string
    }

    mutating func int(_ key: String, default value: Int, range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard let node = take(key), node.null == nil else { return value }
        guard let n = node.int, range.contains(n) else {
            throw ConfigError("config: \(context)\(key) must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    mutating func bool(_ key: String, default value: Bool) throws(ConfigError) -> Bool {
        guard let node = take(key), node.null == nil else { return value }
        guard let scalar = node.scalar, scalar.style == .plain, let b = node.bool else {
            throw ConfigError("config: \(context)\(key) must be true or false")
        }
        return b
    }

    mutating func mapping(_ key: String) throws(ConfigError) -> Reader? {
        guard let node = take(key), node.null == nil else { return nil }
        guard let m = node.mapping else { throw ConfigError("config: \(context)\(key) must be a mapping") }
        return Reader(mapping: m, context: "\(context)\(key).", base: base)
    }

    func rejectUnknown() throws(ConfigError) {
        for key in mapping.keys {
            let name = key.scalar?.string ?? "?"
            if !used.contains(name) { throw ConfigError("config: unknown key \(context)\(name)") }
        }
    }
}
