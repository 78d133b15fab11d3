import APNs
import Glibc

/// Everything a run needs, resolved from flags, the --config file and the
/// environment (in that order of precedence) and checked before anything is sent.
/// Every problem is a `UsageError`: one line, exit status 2.
struct Settings {
    let notification: APNs.Notification
    let configuration: APNsClient.Configuration
    /// What the user would type to reach the same place, for messages.
    let endpointDescription: String
    let tokensPath: String
    let payloadPath: String
    /// Where records go: `--output`, or the `--resume` file; nil for stdout.
    let outputPath: String?
    /// `--resume`: the records of earlier runs, appended to.
    let resumed: ResumedResults?
    let format: OutputFormat
    let dryRun: Bool

    init(_ o: Options, environment: (String) -> String? = Settings.getenv) throws(UsageError) {
        let file = try o.config.map { path throws(UsageError) in try ConfigFile(path: path) }
        /// flag > config file > environment; an empty value counts as unset.
        func setting(_ flag: String?, _ key: String) -> String? {
            [flag, file?[key], environment(key)].lazy.compactMap { $0 }.first { !$0.isEmpty }
        }

        let (environment, endpoint) = try Settings.environment(setting(o.env, "APNS_ENV"), endpoint: o.endpoint)
        endpointDescription = endpoint
        notification = try Settings.notification(o, topic: setting(o.topic, "APNS_TOPIC"))
        let credentials = try Settings.credentials(keyPath: setting(o.key, "APNS_KEY_PATH"),
                                                   keyID: setting(o.keyID, "APNS_KEY_ID"),
                                                   teamID: setting(o.teamID, "APNS_TEAM_ID"))
        configuration = try Settings.configuration(o, credentials: credentials, environment: environment)
        let format = try o.format.map { text throws(UsageError) in
            try Settings.choice(text, flag: "--format", OutputFormat.init(rawValue:), OutputFormat.allCases.map(\.rawValue))
        }
        tokensPath = o.tokens
        payloadPath = o.payload
        resumed = try Settings.resumed(o, format: format)
        outputPath = o.resume ?? o.output
        self.format = resumed?.format ?? format ?? .jsonl
        dryRun = o.dryRun
    }

    /// `--resume FILE` reads FILE and appends to it, so `--output` may only name the same file.
    private static func resumed(_ o: Options, format: OutputFormat?) throws(UsageError) -> ResumedResults? {
        guard let path = o.resume else { return nil }
        if let output = o.output, !sameFile(output, path) {
            throw UsageError("--resume \(path) appends to that file; --output \(output) cannot be another one")
        }
        if sameFile(path, o.tokens) || sameFile(path, o.payload) {
            throw UsageError("--resume \(path) is an input file; records would overwrite it")
        }
        return try ResumedResults(path: path, format: format)
    }

    private static func sameFile(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return a == b }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    static func getenv(_ key: String) -> String? {
        Glibc.getenv(key).map { String(cString: $0) }
    }

    /// `--env`, or `--endpoint` overriding its host and port.
    private static func environment(_ env: String?, endpoint: String?) throws(UsageError) -> (Environment, String) {
        let named: Environment = try choice(env ?? "production", flag: "--env",
                                            { ["production": .production, "sandbox": .sandbox][$0] },
                                            ["sandbox", "production"])
        guard let endpoint else { return (named, "https://\(named.host):\(named.port)") }
        guard let (host, port) = Endpoint.parse(endpoint) else {
            throw UsageError("--endpoint '\(endpoint)' is not https://HOST:PORT")
        }
        return (.custom(host: host, port: port), endpoint)
    }

    private static func notification(_ o: Options, topic: String?) throws(UsageError) -> APNs.Notification {
        guard let topic else {
            throw UsageError("no topic: pass --topic BUNDLE_ID (or APNS_TOPIC in --config or the environment)")
        }
        let pushType = try choice(o.pushType ?? "alert", flag: "--push-type", PushType.init(rawValue:),
                                  PushType.allCases.map(\.rawValue))
        let priority = try o.priority.map { text throws(UsageError) in
            try choice(text, flag: "--priority", { Int($0).flatMap(Priority.init(rawValue:)) }, ["10", "5", "1"])
        }
        let expiration = o.expiration.map { $0 == 0 ? Expiration.immediately : .at(unixSeconds: $0) }
        let payload = try payload(o.payload)
        do {
            return try Notification(topic: topic, pushType: pushType, priority: priority, expiration: expiration,
                                    collapseID: o.collapseID, payload: payload)
        } catch {
            if case .payloadTooLarge = error { throw UsageError(o.payload, error.description) }
            throw UsageError(error.description)
        }
    }

    private static func payload(_ path: String) throws(UsageError) -> Payload {
        let bytes: [UInt8]
        do { bytes = try readSmallFile(path) } catch { throw UsageError(path, error.reason) }
        do {
            return try Payload(json: bytes)
        } catch {
            switch error {
            case .empty: throw UsageError(path, "empty; the payload must be a JSON object")
            case .notJSON(let why): throw UsageError(path, "not valid JSON: \(why)")
            case .notAnObject: throw UsageError(path, "not a JSON object ({...}); APNs payloads are objects")
            }
        }
    }

    private static func credentials(keyPath: String?, keyID: String?, teamID: String?) throws(UsageError) -> Credentials {
        guard let keyPath else {
            throw UsageError("no provider key: pass --key AuthKey_XXXX.p8 (or APNS_KEY_PATH in --config or the environment)")
        }
        guard let keyID else {
            throw UsageError("no key id: pass --key-id (or APNS_KEY_ID in --config or the environment)")
        }
        guard let teamID else {
            throw UsageError("no team id: pass --team-id (or APNS_TEAM_ID in --config or the environment)")
        }
        let key: SigningKey
        do { key = try SigningKey(contentsOf: keyPath) } catch { throw UsageError(error.description) }
        let credentials: Credentials
        do { credentials = try Credentials(key: key, keyID: keyID, teamID: teamID) } catch { throw UsageError(error.description) }
        warnIfOthersCanRead(keyPath)
        return credentials
    }

    /// A provider key signs for the whole team: say so when the file is open to
    /// group or others, but go on (the key works, and the run may be wanted).
    private static func warnIfOthersCanRead(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return }
        let mode = String(info.st_mode & 0o777, radix: 8)
        Stderr.line("warning: \(path) is readable by group or others (mode \(mode)); chmod 600 it")
    }

    private static func configuration(_ o: Options, credentials: Credentials,
                                      environment: Environment) throws(UsageError) -> APNsClient.Configuration {
        var c = APNsClient.Configuration(credentials: credentials, environment: environment)
        // The library logs an unreachable endpoint too; the summary already says it in one line.
        c.logger.logLevel = .critical
        if let cacert = o.cacert {
            do { _ = try readSmallFile(cacert) } catch { throw UsageError(cacert, error.reason) }
            c.caFile = cacert
        }
        if let transport = o.transport {
            c.transport = try choice(transport, flag: "--transport", Transport.init(rawValue:),
                                     Transport.allCases.map(\.rawValue))
        }
        if let n = o.concurrency {
            guard n >= 1 else { throw UsageError("--concurrency must be 1 or more") }
            c.maxInFlight = n
        }
        if let n = o.connections {
            guard n >= 1 else { throw UsageError("--connections must be 1 or more") }
            c.connections = n
        }
        if let seconds = o.timeout {
            guard seconds > 0, seconds <= 3600 else { throw UsageError("--timeout must be more than 0 and at most 3600 seconds") }
            c.requestTimeout = .milliseconds(Int64(seconds * 1000))
            c.connectTimeout = min(c.connectTimeout, c.requestTimeout)
        }
        if let n = o.retries {
            guard n >= 0 else { throw UsageError("--retries must be 0 or more") }
            c.retry.maxAttempts = n + 1
        }
        return c
    }

    /// One of a fixed set of spellings, or an error listing them.
    private static func choice<T>(_ text: String, flag: String, _ make: (String) -> T?,
                                  _ allowed: [String]) throws(UsageError) -> T {
        guard let value = make(text) else {
            throw UsageError("unknown \(flag) '\(text)' (expected \(allowed.joined(separator: ", ")))")
        }
        return value
    }
}
