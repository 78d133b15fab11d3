import APNs
import Glibc

/// Everything a run needs, resolved from flags, the --config file and the
/// environment (in that order of precedence) and checked before anything is sent.
/// Every problem is a `UsageError`: one line, exit status 2.
struct Settings {
    /// What a run reads: one payload for a file of tokens, or a file of messages.
    enum Input {
        case tokens(payloadPath: String, tokensPath: String, notification: APNs.Notification)
        /// `--messages FILE`: each line a message; the flags are the lines' defaults.
        case messages(path: String, defaults: MessageDefaults)

        /// The file whose lines are sent.
        var linesPath: String {
            switch self {
            case .tokens(_, let tokensPath, _): tokensPath
            case .messages(let path, _): path
            }
        }

        var layout: RecordLayout {
            if case .messages = self { return .messages }
            return .tokens
        }
    }

    let input: Input
    let configuration: APNsClient.Configuration
    /// Where each environment's requests go (`--endpoint` and the per-environment flags).
    let endpoints: Endpoints
    /// Where records go: `--output`, or the `--resume` file; nil for stdout.
    let outputPath: String?
    /// `--resume`: the records of earlier runs, appended to.
    let resumed: ResumedResults?
    let format: OutputFormat
    let dryRun: Bool

    /// What the user would type to reach the default environment, for messages.
    var endpointDescription: String { endpoints.describe(endpoints.environment) }

    init(_ o: Options, environment: @escaping (String) -> String? = Settings.getenv) throws(UsageError) {
        let sources = try SettingSources(o, environment: environment)
        let mode = try Settings.mode(o)
        endpoints = try Settings.endpoints(o, sources)
        let topic = sources.value(o.topic, "APNS_TOPIC")
        switch mode {
        case .tokens(let payloadPath, let tokensPath):
            input = .tokens(payloadPath: payloadPath, tokensPath: tokensPath,
                            notification: try Settings.notification(o, topic: topic, payloadPath: payloadPath))
        case .messages(let path):
            input = .messages(path: path, defaults: try Settings.defaults(o, topic: topic))
        }
        let credentials = try NamedCredentials(o, sources).load()
        var configuration = try Settings.configuration(o, credentials: credentials, endpoints: endpoints)
        configuration.proxy = try Settings.proxy(o, sources)
        self.configuration = configuration
        let format = try o.format.map { text throws(UsageError) in
            try Settings.choice(text, flag: "--format", OutputFormat.init(rawValue:), OutputFormat.allCases.map(\.rawValue))
        }
        resumed = try Settings.resumed(o, format: format, input: input)
        outputPath = o.resume ?? o.output
        self.format = resumed?.format ?? format ?? .jsonl
        dryRun = o.dryRun
    }

    private enum Mode {
        case tokens(payload: String, tokens: String)
        case messages(String)
    }

    /// `PAYLOAD.json TOKENS.txt` or `--messages FILE`: exactly one of them.
    private static func mode(_ o: Options) throws(UsageError) -> Mode {
        switch (o.messages, o.payload, o.tokens) {
        case (let messages?, nil, nil):
            return .messages(messages)
        case (_?, _, _):
            throw UsageError("--messages replaces PAYLOAD.json and TOKENS.txt; give one or the other")
        case (nil, let payload?, let tokens?):
            return .tokens(payload: payload, tokens: tokens)
        case (nil, _?, nil):
            throw UsageError("missing TOKENS.txt: give PAYLOAD.json TOKENS.txt, or --messages MESSAGES.jsonl")
        case (nil, nil, _):
            throw UsageError("nothing to send: give PAYLOAD.json TOKENS.txt, or --messages MESSAGES.jsonl")
        }
    }

    /// `--resume FILE` reads FILE and appends to it, so `--output` may only name the same file.
    private static func resumed(_ o: Options, format: OutputFormat?, input: Input) throws(UsageError) -> ResumedResults? {
        guard let path = o.resume else { return nil }
        if let output = o.output, !sameFile(output, path) {
            throw UsageError("--resume \(path) appends to that file; --output \(output) cannot be another one")
        }
        var inputs = [input.linesPath]
        if case .tokens(let payloadPath, _, _) = input { inputs.append(payloadPath) }
        if inputs.contains(where: { sameFile(path, $0) }) {
            throw UsageError("--resume \(path) is an input file; records would overwrite it")
        }
        return try ResumedResults(path: path, format: format, layout: input.layout)
    }

    private static func sameFile(_ a: String, _ b: String) -> Bool {
        var sa = stat(), sb = stat()
        guard stat(a, &sa) == 0, stat(b, &sb) == 0 else { return a == b }
        return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino
    }

    static func getenv(_ key: String) -> String? {
        Glibc.getenv(key).map { String(cString: $0) }
    }

    /// `--env` (APNS_ENV), and where each environment's requests go: `--endpoint`
    /// overrides `--env`'s host and port, `--sandbox-endpoint` and `--production-endpoint`
    /// name one environment each (with --messages, lines may name either).
    static func endpoints(_ o: Options, _ sources: SettingSources) throws(UsageError) -> Endpoints {
        let named: Environment = try choice(sources.value(o.env, "APNS_ENV") ?? "production", flag: "--env",
                                            { ["production": .production, "sandbox": .sandbox][$0] },
                                            ["sandbox", "production"])
        var endpoints = Endpoints(environment: named)
        if let text = o.endpoint { endpoints[named] = try Endpoint(flag: "--endpoint", text) }
        for (flag, text, environment) in [("--sandbox-endpoint", o.sandboxEndpoint, Environment.sandbox),
                                          ("--production-endpoint", o.productionEndpoint, .production)] {
            guard let text else { continue }
            let endpoint = try Endpoint(flag: flag, text)
            if let earlier = endpoints[environment], earlier != endpoint {
                throw UsageError("--endpoint (for --env \(environment == .sandbox ? "sandbox" : "production")) and \(flag) name different endpoints; give one")
            }
            endpoints[environment] = endpoint
        }
        return endpoints
    }

    private static func notification(_ o: Options, topic: String?, payloadPath: String) throws(UsageError) -> APNs.Notification {
        guard let topic else {
            throw UsageError("no topic: pass --topic BUNDLE_ID (or APNS_TOPIC in --config or the environment)")
        }
        let d = try defaults(o, topic: topic)
        let payload = try payload(payloadPath)
        if d.pushType == .liveactivity {
            do { try LiveActivity.check(payload) } catch { throw UsageError(payloadPath, error.description) }
        }
        if d.pushType == .widgets {
            do { try WidgetsPush.check(payload) } catch { throw UsageError(payloadPath, error.description) }
        }
        do {
            return try Notification(topic: topic, pushType: d.pushType, priority: d.priority, expiration: d.expiration,
                                    collapseID: d.collapseID, payload: payload)
        } catch {
            if case .payloadTooLarge = error { throw UsageError(payloadPath, error.description) }
            throw UsageError(error.description)
        }
    }

    /// The header flags, checked: the notification's headers, or the defaults of
    /// `--messages` lines. Header values with a control character are refused here
    /// (never echoed: the value could hold a line break).
    private static func defaults(_ o: Options, topic: String?) throws(UsageError) -> MessageDefaults {
        for (flag, value) in [("--topic", topic), ("--collapse-id", o.collapseID)] {
            if let value, let c = HeaderValue.controlCharacter(in: value) {
                throw UsageError("\(flag) has a control character, \(HeaderValue.describe(c)); header values cannot carry one")
            }
        }
        var d = MessageDefaults(topic: topic)
        d.pushType = try choice(o.pushType ?? "alert", flag: "--push-type", PushType.init(rawValue:),
                                PushType.allCases.map(\.rawValue))
        d.priority = try o.priority.map { text throws(UsageError) in
            try choice(text, flag: "--priority", { Int($0).flatMap(Priority.init(rawValue:)) }, ["10", "5", "1"])
        }
        d.expiration = o.expiration.map { $0 == 0 ? Expiration.immediately : .at(unixSeconds: $0) }
        d.collapseID = o.collapseID
        // The library's own checks of the headers (priority for the push type, collapse
        // id length, expiration), on an empty payload: the same words in both modes.
        do {
            _ = try Notification(topic: topic ?? "topic", pushType: d.pushType, priority: d.priority,
                                 expiration: d.expiration, collapseID: d.collapseID, payload: try Payload(json: "{}"))
        } catch let error as Notification.Error {
            throw UsageError(error.description)
        } catch {
            throw UsageError("\(error)")
        }
        return d
    }

    static func payload(_ path: String) throws(UsageError) -> Payload {
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

    static func configuration(_ o: Options, credentials: Credentials,
                                      endpoints: Endpoints) throws(UsageError) -> APNsClient.Configuration {
        var c = APNsClient.Configuration(credentials: credentials, environment: endpoints.environment)
        endpoints.apply(to: &c)
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

    /// The proxy as given (`--proxy`, else APNS_PROXY in --config or the environment),
    /// used for every endpoint; else https_proxy/HTTPS_PROXY with NO_PROXY, as curl reads
    /// them. An explicit proxy ignores NO_PROXY: it was asked for by name.
    static func proxy(_ o: Options, _ sources: SettingSources) throws(UsageError) -> Proxy? {
        let given = o.proxy.map { (source: "--proxy", url: $0) }
            ?? sources.value(nil, "APNS_PROXY").map { (source: "APNS_PROXY", url: $0) }
        do throws(Proxy.Error) {
            if let given { return try Proxy(url: given.url) }
            return try Proxy.fromEnvironment(sources.environment)
        } catch {
            throw UsageError("\(given?.source ?? "https_proxy"): \(error.description)")
        }
    }

    /// One of a fixed set of spellings, or an error listing them.
    static func choice<T>(_ text: String, flag: String, _ make: (String) -> T?,
                                  _ allowed: [String]) throws(UsageError) -> T {
        guard let value = make(text) else {
            throw UsageError("unknown \(flag) '\(text)' (expected \(allowed.joined(separator: ", ")))")
        }
        return value
    }
}

/// Where a setting's value comes from: its flag, else the --config file, else the
/// environment; an empty value counts as unset. A send, a broadcast and the doctor
/// all read their settings through this one precedence.
struct SettingSources {
    let config: ConfigFile?
    let environment: (String) -> String?

    /// Reads the --config file, if one is named.
    init(_ o: Options, environment: @escaping (String) -> String?) throws(UsageError) {
        config = try o.config.map { path throws(UsageError) in try ConfigFile(path: path) }
        self.environment = environment
    }

    func value(_ flag: String?, _ key: String) -> String? {
        [flag, config?[key], environment(key)].lazy.compactMap { $0 }.first { !$0.isEmpty }
    }
}

extension Endpoint {
    /// `https://HOST:PORT` as `flag` gave it. Only the scheme, a host (an IPv6 address
    /// in brackets) and a port: APNs' paths are fixed, so anything more is a mistake
    /// worth stopping for.
    init(flag: String, _ text: String) throws(UsageError) {
        guard let (host, port) = Endpoint.hostAndPort(text) else {
            throw UsageError("\(flag) '\(text)' is not https://HOST:PORT")
        }
        self.init(host: host, port: port)
    }

    private static func hostAndPort(_ text: String) -> (host: String, port: Int)? {
        guard text.hasPrefix("https://") else { return nil }
        var rest = Substring(text.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        let host: Substring, portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix(":") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            portText = rest[rest.index(close, offsetBy: 2)...]
        } else {
            guard let colon = rest.lastIndex(of: ":") else { return nil }
            host = rest[..<colon]
            guard !host.contains(":") else { return nil }   // IPv6 needs its brackets
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { "/@?#[] ".contains($0) }),
              !portText.isEmpty, portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber),
              portText.count <= 5, let port = Int(portText), (1...65535).contains(port)
        else { return nil }
        return (String(host), port)
    }
}

/// `--env` and the endpoint overrides, by environment.
struct Endpoints {
    /// `--env`: where sends that name no environment go.
    let environment: Environment
    private var overrides: [Environment: Endpoint] = [:]

    init(environment: Environment) {
        self.environment = environment
    }

    subscript(environment: Environment) -> Endpoint? {
        get { overrides[environment] }
        set { overrides[environment] = newValue }
    }

    /// "https://HOST:PORT" where `environment`'s requests go.
    func describe(_ environment: Environment) -> String {
        if let e = overrides[environment] {
            return e.host.contains(":") ? "https://[\(e.host)]:\(e.port)" : "https://\(e.host):\(e.port)"
        }
        return "https://\(environment.host):\(environment.port)"
    }

    /// "HOST:PORT", as the library's errors name it.
    func hostPort(_ environment: Environment) -> String {
        overrides[environment]?.description ?? "\(environment.host):\(environment.port)"
    }

    func apply(to c: inout APNsClient.Configuration) {
        c.sandboxEndpoint = overrides[.sandbox]
        c.productionEndpoint = overrides[.production]
    }
}

extension Credentials {
    /// The dry run's "auth" line: what was checked, never secret material.
    func dryRunDescription(signatures: Int) -> String {
        switch self {
        case .token(let t):
            return "ES256 provider token signed (kid \(t.keyID), iss \(t.teamID); \(signatures) signature\(signatures == 1 ? "" : "s"))"
        case .certificate(let c):
            let environments = [c.isForSandbox ? "sandbox" : nil, c.isForProduction ? "production" : nil].compactMap { $0 }
            return "TLS client certificate for \(c.bundleID ?? "(no UID)") (\(environments.isEmpty ? "no APNs environment marked" : environments.joined(separator: " and ")); topics \(c.topics.joined(separator: ", ")))"
        }
    }
}
