import CAPNsMock

/// What the mock has seen and done; a snapshot of independent counters.
public struct MockStatistics: Sendable, Equatable {
    /// TCP connections accepted.
    public var connectionsAccepted: UInt64
    /// Connections open now.
    public var connectionsCurrent: UInt64
    /// TLS failures, including clients that do not offer ALPN h2.
    public var handshakesFailed: UInt64
    /// Requests begun (HEADERS received).
    public var streams: UInt64
    /// Requests answered.
    public var requests: UInt64
    /// Answers by HTTP status.
    public var byStatus: [Int: UInt64]
    /// Error answers by APNs reason.
    public var byReason: [String: UInt64]
    /// Different provider tokens seen.
    public var distinctJWTs: UInt64
    /// ES256 signatures of provider tokens verified.
    public var jwtVerifications: UInt64
    /// Most concurrent streams seen on one connection.
    public var maxConcurrentStreamsSeen: UInt64
    /// Application bytes read from clients (inside TLS).
    public var bytesIn: UInt64
    /// Application bytes written to clients (inside TLS).
    public var bytesOut: UInt64
    /// GOAWAY frames sent (`MockConfiguration.goawayAfter`, `MockConfiguration.idleTimeout`).
    public var goawaysSent: UInt64
    /// Connections reset (`MockConfiguration.resetAfter`).

    public var resetsDone: UInt64
    /// SETTINGS frames after the initial one (raise, drop, restore).
    public var settingsSent: UInt64
    /// Streams refused for going above a lowered limit the client had not yet
    /// acknowledged (a legal race: the client sends them again).
    public var streamsRefused: UInt64
    /// Streams opened above a limit the client had acknowledged: a client bug, and a
    /// connection error.
    public var streamsOverLimit: UInt64
    /// Most concurrent streams on one connection once a `settingsDrop` was restored
    /// and acknowledged: whether the client ramps up again.
    public var maxConcurrentStreamsRestored: UInt64
    /// Broadcast channels that exist now (every bundle id), created, deleted, and
    /// creates refused for the limit.
    public var channelsCurrent: UInt64
    /// Broadcast channels created.
    public var channelsCreated: UInt64
    /// Broadcast channels deleted.
    public var channelsDeleted: UInt64
    /// Channel creates refused for the limit (`MockConfiguration.channelLimit`).
    public var channelsRefused: UInt64
    /// Request header blocks received and their HPACK-encoded bytes, and the same
    /// past each connection's first `headerWarmup` requests (the client's table warm).
    public var headerBlocks: UInt64
    /// HPACK-encoded bytes of `headerBlocks`.
    public var headerBlockBytes: UInt64
    /// Header blocks past each connection's first `headerWarmup` requests.
    public var warmHeaderBlocks: UInt64
    /// HPACK-encoded bytes of `warmHeaderBlocks`.
    public var warmHeaderBlockBytes: UInt64
    /// Requests per connection before its header blocks count as warm.
    public static let headerWarmup = Int(CAPNS_MOCK_HEADER_WARMUP)


    /// Average HPACK bytes of a request's headers once the connection is warm; nil before.
    public var warmHeaderBytesPerRequest: Double? {
        warmHeaderBlocks == 0 ? nil : Double(warmHeaderBlockBytes) / Double(warmHeaderBlocks)
    }

    init(_ s: capns_mock_stats) {
        connectionsAccepted = s.connections_accepted
        connectionsCurrent = s.connections_current
        handshakesFailed = s.handshakes_failed
        streams = s.streams
        requests = s.requests
        distinctJWTs = s.jwt_distinct
        jwtVerifications = s.jwt_verifications
        maxConcurrentStreamsSeen = s.max_streams_seen
        bytesIn = s.bytes_in
        bytesOut = s.bytes_out
        goawaysSent = s.goaways_sent
        resetsDone = s.resets_done
        settingsSent = s.settings_sent
        streamsRefused = s.streams_refused
        streamsOverLimit = s.streams_over_limit
        maxConcurrentStreamsRestored = s.max_streams_restored
        channelsCurrent = s.channels_current
        channelsCreated = s.channels_created
        channelsDeleted = s.channels_deleted
        channelsRefused = s.channels_refused
        headerBlocks = s.header_blocks
        headerBlockBytes = s.header_block_bytes
        warmHeaderBlocks = s.warm_header_blocks
        warmHeaderBlockBytes = s.warm_header_block_bytes
        var statuses: [Int: UInt64] = [:]
        withUnsafeBytes(of: s.status) { raw in
            for (code, count) in raw.bindMemory(to: UInt64.self).enumerated() where count > 0 {
                statuses[code] = count
            }
        }
        byStatus = statuses
        var reasons: [String: UInt64] = [:]
        withUnsafeBytes(of: s.reasons) { raw in
            for (index, count) in raw.bindMemory(to: UInt64.self).enumerated() where count > 0 {
                let name = String(cString: capns_mock_reason_name(Int32(index)))
                if !name.isEmpty { reasons[name] = count }
            }
        }
        byReason = reasons
    }
}
