import CAPNsMock
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a `MockServer` could not be made.
public enum MockError: Error, CustomStringConvertible, Equatable {
    /// The mock could not start: the one-line reason from C (bad key, port in use, ...).
    case startFailed(String)
    /// A table entry (script, unregistered token) was refused.
    case invalidConfiguration(String)

    /// One line saying what failed.
    public var description: String {
        switch self {
        case .startFailed(let why): "mock APNs server failed to start: \(why)"
        case .invalidConfiguration(let why): "mock APNs server configuration: \(why)"
        }
    }
}

/// A mock APNs server on its own threads (C: nghttp2 + OpenSSL + epoll), serving
/// from `init` until `stop()` or deinit.
public final class MockServer: Sendable {
    /// The C mock; nil once stopped. The lock keeps `stop` from racing a reader.
    private let handle: Mutex<OpaquePointer?>
    /// The port it listens on: the configured one, or the one picked for port 0.
    public let port: UInt16
    /// What it was started with.
    public let configuration: MockConfiguration

    /// Starts the mock: it listens and serves before this returns. Throws `MockError`.
    public init(_ configuration: MockConfiguration) throws {
        let mock = try Self.create(configuration)
        do {
            try Self.fillTables(mock, configuration)
            var err = [CChar](repeating: 0, count: Int(CAPNS_MOCK_ERR_MAX))
            if capns_mock_start(mock, &err, err.count) != 0 {
                throw MockError.startFailed(cText(err))
            }
        } catch {
            capns_mock_destroy(mock)
            throw error
        }
        self.port = capns_mock_port(mock)
        self.configuration = configuration
        self.handle = Mutex(mock)
    }

    deinit { stop() }

    /// Idempotent: stops the threads and closes every connection.
    public func stop() {
        let mock = handle.withLock { h -> OpaquePointer? in
            defer { h = nil }
            return h
        }
        if let mock { capns_mock_destroy(mock) }
    }

    /// The counters now; all zero once stopped.
    public func statistics() -> MockStatistics {

        handle.withLock { h in
            var s = capns_mock_stats()
            if let h { capns_mock_get_stats(h, &s) }
            return MockStatistics(s)
        }
    }

    /// The statistics as one JSON object (what the CLI prints).
    public func statisticsJSON() -> String {
        handle.withLock { h in
            guard let h else { return "{}" }
            var buf = [CChar](repeating: 0, count: 16384)
            capns_mock_stats_json(h, &buf, buf.count)
            return cText(buf)
        }
    }

    /// Requests kept so far (needs `recordRequests`), in arrival order per thread.
    public func recordedRequests() -> [RecordedRequest] {
        handle.withLock { h in
            guard let h else { return [] }
            let count = capns_mock_record_count(h)
            return (0..<count).compactMap { i in
                capns_mock_record_get(h, i).map { RecordedRequest($0.pointee) }
            }
        }
    }

    /// Connections the mock reset (`resetAfter`), while recording: answers it decided
    /// on them may never have reached the client.
    public func resetConnections() -> Set<UInt64> {
        handle.withLock { h in
            guard let h else { return [] }
            var ids = [UInt64](repeating: 0, count: capns_mock_reset_connections(h, nil, 0))
            let n = capns_mock_reset_connections(h, &ids, ids.count)
            return Set(ids.prefix(n))
        }
    }

    /// How many requests arrived for this token, whatever their answer (0 for a
    /// token not counted: see `countsEveryToken`).
    public func attempts(for token: String) -> Int {
        handle.withLock { h in h.map { Int(capns_mock_attempts($0, token)) } ?? 0 }
    }

    /// Changes the stream limit every connection advertises after its first success;
    /// open connections get a SETTINGS frame.
    public func setMaxStreams(_ limit: Int) {
        handle.withLock { h in
            if let h { capns_mock_set_max_streams(h, UInt32(clamping: limit)) }
        }
    }

    // MARK: - building the C mock

    private static func create(_ c: MockConfiguration) throws -> OpaquePointer {
        for keyID in Set(c.keyEnvironments.keys).union(c.keyTopics.keys).sorted() where c.authKeys[keyID] == nil {
            throw MockError.startFailed("key \(keyID) has an environment or topics but is not one of the provider keys")
        }
        // C copies what it keeps; these strings only need to outlive the call.
        var owned: [UnsafeMutablePointer<CChar>] = []
        defer { owned.forEach { free($0) } }
        func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
            let p = strdup(s)!
            owned.append(p)
            return p
        }
        // Each key's topic list, as C pointer arrays alive for the call.
        var topicLists: [UnsafeMutableBufferPointer<UnsafePointer<CChar>?>] = []
        defer { topicLists.forEach { $0.deallocate() } }
        let keys = c.authKeys.sorted { $0.key < $1.key }.map { keyID, path in
            let bound = c.keyTopics[keyID] ?? []
            let list = UnsafeMutableBufferPointer<UnsafePointer<CChar>?>.allocate(capacity: max(1, bound.count))
            for (i, topic) in bound.enumerated() { list[i] = UnsafePointer(cString(topic)) }
            topicLists.append(list)
            let environment: Int32 = switch c.keyEnvironments[keyID] {
            case nil: 0
            case .sandbox?: CAPNS_MOCK_ENV_SANDBOX
            case .production?: CAPNS_MOCK_ENV_PRODUCTION
            }
            return capns_mock_auth_key(key_id: cString(keyID), path: cString(path),
                                       team_id: c.keyTeams[keyID].map { UnsafePointer(cString($0)) },
                                       environment: environment,
                                       topics: UnsafePointer(list.baseAddress), n_topics: bound.count)
        }
        let teams: [UnsafePointer<CChar>?] = c.teamIDs.map { UnsafePointer(cString($0)) }
        let topics: [UnsafePointer<CChar>?] = c.topics.map { UnsafePointer(cString($0)) }

        var cfg = capns_mock_config()
        cfg.host = UnsafePointer(cString(c.host))
        cfg.port = c.port
        cfg.allow_non_loopback = c.allowNonLoopback ? 1 : 0
        cfg.cert_file = UnsafePointer(cString(c.certificatePath))
        cfg.key_file = UnsafePointer(cString(c.privateKeyPath))
        cfg.max_streams = UInt32(clamping: c.maxStreams)
        cfg.initial_streams = UInt32(clamping: c.initialStreams)
        cfg.sandbox = c.sandbox ? 1 : 0
        cfg.latency_us = microseconds(c.latency)
        cfg.jitter_us = microseconds(c.jitter)
        cfg.rate_429 = c.failureRates[429] ?? 0
        cfg.rate_500 = c.failureRates[500] ?? 0
        cfg.rate_503 = c.failureRates[503] ?? 0
        cfg.goaway_after = UInt64(clamping: c.goawayAfter ?? 0)
        cfg.reset_after = UInt64(clamping: c.resetAfter ?? 0)
        if let drop = c.settingsDrop {
            cfg.settings_drop_after = UInt64(clamping: drop.after)
            cfg.settings_drop_to = UInt32(clamping: drop.to)
            cfg.settings_restore_after = UInt64(clamping: drop.restoreAfter ?? 0)
        }
        cfg.idle_timeout_ms = c.idleTimeout.map { microseconds($0) / 1000 } ?? 0
        cfg.idle_500_after_ms = c.idle500After.map { microseconds($0) / 1000 } ?? 0
        cfg.token_update_interval_s = c.tokenUpdateInterval <= .zero
            ? -1 : max(1, microseconds(c.tokenUpdateInterval) / 1_000_000)
        cfg.stall = c.stall ? 1 : 0
        cfg.stall_after = UInt64(clamping: c.stallAfter ?? 0)
        cfg.no_ping_ack = c.noPingAck ? 1 : 0
        cfg.expire_first_token = c.expireFirstProviderTokenAfter == nil ? 0 : 1
        cfg.expire_first_token_after = UInt64(clamping: c.expireFirstProviderTokenAfter ?? 0)
        cfg.record_cap = c.recordRequests ? max(0, c.recordCap) : 0
        cfg.count_known_only = c.countsEveryToken ? 0 : 1
        cfg.seed = c.seed
        cfg.threads = Int32(clamping: c.threads)
        cfg.client_ca_file = c.clientCA.map { UnsafePointer(cString($0)) }
        cfg.channel_limit = UInt32(clamping: max(1, c.channelLimit))
        cfg.clock_offset_s = c.clockOffset.components.seconds
        cfg.broadcast_disabled = c.broadcastEnabled ? 0 : 1

        var err = [CChar](repeating: 0, count: Int(CAPNS_MOCK_ERR_MAX))
        let mock = keys.withUnsafeBufferPointer { k in
            teams.withUnsafeBufferPointer { t in
                topics.withUnsafeBufferPointer { p in
                    cfg.auth_keys = k.baseAddress
                    cfg.n_auth_keys = k.count
                    cfg.teams = t.baseAddress
                    cfg.n_teams = t.count
                    cfg.topics = p.baseAddress
                    cfg.n_topics = p.count
                    return capns_mock_create(&cfg, &err, err.count)
                }
            }
        }
        guard let mock else { throw MockError.startFailed(cText(err)) }
        return mock
    }

    private static func fillTables(_ mock: OpaquePointer, _ c: MockConfiguration) throws {
        for (token, timestamp) in c.unregistered where capns_mock_add_unregistered(mock, token, timestamp) != 0 {
            throw MockError.invalidConfiguration("cannot mark \(token) unregistered")
        }
        for token in Set(c.scripted.keys).union(c.forced.keys) {
            let answers = c.scripted[token] ?? []
            let ok = withAnswers(answers) { list in
                withAnswers(c.forced[token].map { [$0] } ?? []) { forced in
                    // An empty array's baseAddress need not be nil: say "no forced answer" explicitly.
                    capns_mock_script(mock, token, list.baseAddress, list.count,
                                      forced.isEmpty ? nil : forced.baseAddress) == 0
                }
            }
            if !ok { throw MockError.invalidConfiguration("bad scripted answers for \(token)") }
        }
    }

    /// The answers as C structs, their reason strings alive for the call.
    private static func withAnswers<R>(_ answers: [MockAnswer],
                                       _ body: (UnsafeBufferPointer<capns_mock_answer>) -> R) -> R {
        let reasons = answers.map { strdup($0.reason ?? "")! }
        defer { reasons.forEach { free($0) } }
        let list = zip(answers, reasons).map { answer, reason in
            capns_mock_answer(status: Int32(clamping: answer.status), reason: UnsafePointer(reason),
                              timestamp_ms: answer.timestamp ?? 0)
        }
        return list.withUnsafeBufferPointer(body)
    }

    private static func microseconds(_ d: Duration) -> Int64 {
        let (seconds, attoseconds) = d.components
        return seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    }
}

/// A NUL-terminated C buffer as a String.
private func cText(_ buffer: [CChar]) -> String {
    buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}
