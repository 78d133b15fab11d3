import APNsMock
import ArgumentParser
import Glibc

/// The mock APNs server as a program: flags become a MockConfiguration, then it
/// serves until SIGINT/SIGTERM, printing statistics then and on SIGUSR1.
@main
struct MockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-mock",
        abstract: "A mock APNs provider API server (HTTP/2 over TLS, token or certificate auth) for tests and benchmarks.",
        discussion: """
        Answers as APNs answers: validates the provider JWT (ES256), headers and payload, \
        and replies with APNs status codes and reasons. Faults are deterministic under --seed. \
        Prints "listening on HOST:PORT" on stdout once serving. Statistics (JSON) go to \
        --stats or stderr on SIGUSR1 and on exit (SIGINT/SIGTERM).
        """,
        version: buildVersionLine)

    @Option(help: "Address to bind (numeric). Non-loopback needs --allow-non-loopback.")
    var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one (printed on stdout).")
    var port: UInt16 = 2197
    @Flag(help: "Allow binding an address other than loopback.")
    var allowNonLoopback = false
    @Option(help: "TLS certificate chain (PEM).")
    var cert: String
    @Option(help: "TLS private key (PEM).")
    var key: String
    @Option(name: .customLong("auth-key"),
            help: "Provider key to verify JWTs with: AuthKey_KEYID.p8 (key id from the name) or KEYID=PATH. Repeatable.")
    var authKeys: [String] = []
    @Option(name: .customLong("team-id"), help: "Accepted team id (JWT \"iss\"). Repeatable.")
    var teamIDs: [String] = []
    @Option(name: .customLong("key-team"),
            help: "KEYID=TEAMID: the team a provider key signs for (needed with several --team-id). Repeatable.")
    var keyTeams: [String] = []
    @Option(name: .customLong("key-environment"),
            help: "KEYID=sandbox|production: a key restricted to one environment; used on the other one it is 403 BadEnvironmentKeyIdInToken. Repeatable.")
    var keyEnvironments: [String] = []
    @Option(name: .customLong("key-topics"),
            help: "KEYID=BUNDLE[,BUNDLE...]: a topic-specific key; a push with it to another bundle id is 400 TopicMismatch. Repeatable.")
    var keyTopics: [String] = []
    @Option(name: .customLong("topic"), help: "Accepted bundle id; push-type suffixes are implied. Repeatable.")
    var topics: [String] = []
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS after a connection's first success (1 before).")
    var maxStreams = 1000
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS before a connection's first success.")
    var initialStreams = 1
    @Option(help: "File of unregistered tokens (410): one per line, optional \",timestamp_ms\".")
    var unregistered: String?
    @Option(help: "Delay before each answer, e.g. 50ms, optionally with jitter: 50ms,10ms.")
    var latency: String?
    @Option(help: "Fractions answered with an error, e.g. 429=0.01,503=0.005,500=0.001.")
    var fail: String?
    @Option(help: "GOAWAY (NO_ERROR) when a connection's Nth request begins; streams up to it are answered.")
    var goawayAfter: Int?
    @Option(help: "TCP reset (SO_LINGER 0) when a connection's Nth request arrives; it is never answered.")
    var resetAfter: Int?
    @Option(help: "N:M[:K] - after N requests on a connection advertise M streams, restore K requests later.")
    var settingsDropAfter: String?
    @Option(help: "GOAWAY {\"reason\":\"IdleTimeout\"} after a connection is idle this long, e.g. 30s.")
    var idleTimeout: String?
    @Option(name: .customLong("idle-500-after"),
            help: "The first answer after a connection was idle this long is 500 InternalServerError.")
    var idle500After: String?
    @Option(help: "A token change on a connection sooner than this is 429 TooManyProviderTokenUpdates.")
    var tokenUpdateInterval = "20m"
    @Flag(help: "Accept, handshake and read requests, but never answer.")
    var stall = false
    @Option(help: "Answer the first N requests (all connections together), then never answer again.")
    var stallAfter: Int?
    @Flag(help: "Never acknowledge a client's PING (requests are still answered).")
    var noPingAck = false
    @Option(name: .customLong("clock-offset"),
            help: ArgumentHelp("Run the mock's clock this many seconds ahead of the machine's (negative: behind), for provider token ages and the date header of error answers.",
                               valueName: "SECONDS"))
    var clockOffset: Int64 = 0
    @Flag(help: "Development environment: 200 answers carry apns-unique-id.")
    var sandbox = false
    @Option(help: "Write statistics (JSON) here instead of stderr.")
    var stats: String?
    @Option(help: "Event-loop threads (SO_REUSEPORT listeners).")
    var threads = 1
    @Option(help: "Seed for every random choice (faults, jitter, generated ids).")
    var seed: UInt64 = 0
    @Option(name: .customLong("client-ca"),
            help: ArgumentHelp("Certificate auth: ask clients for a TLS certificate and trust those this CA (PEM) issued; requests without a token are judged by it (UID = topic; --sandbox decides which environment marker fits).",
                               valueName: "CA.pem"))
    var clientCA: String?

    func run() throws {
        let config = try makeConfiguration()
        let server: MockServer
        do { server = try MockServer(config) } catch {
            writeAll("apns-mock: \(error)\n", to: STDERR_FILENO)
            throw ExitCode(2)
        }
        serve(server, statsPath: stats, announce: "listening on \(host):\(server.port)\n")
    }

    func makeConfiguration() throws -> MockConfiguration {
        var c = MockConfiguration(certificatePath: cert, privateKeyPath: key, teamIDs: teamIDs, topics: topics)
        c.host = host
        c.port = port
        c.allowNonLoopback = allowNonLoopback
        for spec in authKeys {
            let (keyID, path) = try Self.parseAuthKey(spec)
            c.authKeys[keyID] = path
        }
        for spec in keyTeams {
            guard let eq = spec.firstIndex(of: "="), eq != spec.startIndex, eq != spec.index(before: spec.endIndex) else {
                throw ValidationError("--key-team wants KEYID=TEAMID, got \(spec)")
            }
            c.keyTeams[String(spec[..<eq])] = String(spec[spec.index(after: eq)...])
        }
        for spec in keyEnvironments {
            let (keyID, value) = try Self.keyValue(spec, "--key-environment", "KEYID=sandbox|production")
            guard let environment = MockConfiguration.KeyEnvironment(rawValue: value) else {
                throw ValidationError("--key-environment: \"\(value)\" is neither sandbox nor production (in \(spec))")
            }
            c.keyEnvironments[keyID] = environment
        }
        for spec in keyTopics {
            let (keyID, value) = try Self.keyValue(spec, "--key-topics", "KEYID=BUNDLE[,BUNDLE...]")
            let bundles = value.split(separator: ",", omittingEmptySubsequences: false)
                .map { Self.trimmed($0) }
            guard !bundles.contains(where: \.isEmpty) else {
                throw ValidationError("--key-topics: an empty bundle id in \(spec)")
            }
            c.keyTopics[keyID, default: []] += bundles
        }
        c.maxStreams = maxStreams
        c.initialStreams = initialStreams
        c.sandbox = sandbox
        if let unregistered { c.unregistered = try Self.readUnregistered(unregistered) }
        if let latency {
            let parts = latency.split(separator: ",").map { Self.trimmed($0) }
            c.latency = try Self.duration(parts[0], "--latency")
            if parts.count > 1 {
                c.jitter = try Self.duration(Self.trimmed(parts[1].replacing("jitter", with: "")), "--latency")
            }
        }
        if let fail { c.failureRates = try Self.parseRates(fail) }
        for (flag, value) in [("--goaway-after", goawayAfter), ("--reset-after", resetAfter), ("--stall-after", stallAfter)] {
            if let value, value < 1 { throw ValidationError("\(flag) wants a count of at least 1, got \(value)") }
        }
        c.goawayAfter = goawayAfter
        c.resetAfter = resetAfter
        if let drop = settingsDropAfter {
            let n = drop.split(separator: ":").map { Int($0) }
            guard (2...3).contains(n.count), !n.contains(nil) else {
                throw ValidationError("--settings-drop-after wants N:M or N:M:K, got \(drop)")
            }
            c.settingsDrop = .init(after: n[0]!, to: n[1]!, restoreAfter: n.count == 3 ? n[2] : nil)
        }
        if let idleTimeout { c.idleTimeout = try Self.duration(idleTimeout, "--idle-timeout") }
        if let idle500After { c.idle500After = try Self.duration(idle500After, "--idle-500-after") }
        c.tokenUpdateInterval = try Self.duration(tokenUpdateInterval, "--token-update-interval")
        c.stall = stall
        // Nothing reads a token's count here: a load test's tokens cost nothing to keep.
        c.countsEveryToken = false
        c.stallAfter = stallAfter
        c.noPingAck = noPingAck
        c.threads = threads
        c.seed = seed
        c.clientCA = clientCA
        c.clockOffset = .seconds(clockOffset)
        return c
    }
}
