import APNs
import Foundation
import Histogram

/// One benchmark run: a client with the chosen transport, connections and streams,
/// sending one notification to `count` distinct tokens as fast as results are read.
struct Workload: Sendable {
    let count: Int
    let credentials: Credentials
    let notification: APNs.Notification
    let transport: Transport
    let connections: Int
    let streams: Int

    /// The payload scripts/bench.sh gives h2load: a 231-byte alert, compact.
    static let defaultPayload = #"{"aps":{"alert":{"title":"Order update","body":"\#(String(repeating: "x", count: 150))"},"sound":"default"},"id":12345}"#

    init(count: Int, keys: KeyMaterial, payloadPath: String?, transport: Transport,
         connections: Int, streams: Int) throws {
        self.count = count
        credentials = try Credentials(key: SigningKey(contentsOf: keys.providerKey), keyID: keys.keyID,
                                      teamID: keys.teamID)
        let json = try payloadPath.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
            ?? Data(Workload.defaultPayload.utf8)
        notification = try APNs.Notification(topic: keys.topic, payload: Payload(json: json))
        self.transport = transport
        self.connections = connections
        self.streams = streams
    }

    func run(against target: Target) async throws -> Report {
        let client = try APNsClient(configuration: .init(
            credentials: credentials, environment: target.environment, caFile: target.caFile,
            transport: transport, connections: connections, maxInFlight: streams))
        // Latency in microseconds, up to a minute (the request deadline is 30 s).
        var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var statuses: [Int: Int] = [:]
        var firstError: String?

        let before = ProcessUsage.now()
        let clock = ContinuousClock()
        let start = clock.now
        for await result in client.send(notification, to: SyntheticTokens(count: count)) {
            statuses[result.status, default: 0] += 1
            if result.attempts > 0 { latency.record(UInt64(result.latency.microseconds)) }
            if firstError == nil, !result.isDelivered {
                firstError = result.error ?? result.reason?.rawValue ?? "status \(result.status)"
            }
        }
        let elapsed = clock.now - start
        let after = ProcessUsage.now()
        // Timed apart: closing is not sending, but a slow close is a finding of its own.
        let closing = clock.now
        await client.shutdown()
        let shutdown = clock.now - closing

        return Report(
            requests: count, transport: transport.rawValue, connections: connections, streams: streams,
            payloadBytes: notification.payload.count, seconds: elapsed.seconds,
            shutdownSeconds: shutdown.seconds, statuses: statuses, firstError: firstError, latency: latency,
            userSeconds: after.userSeconds - before.userSeconds,
            systemSeconds: after.systemSeconds - before.systemSeconds,
            peakRSS: after.peakRSS, statistics: client.statistics,
            mockConnectionsAccepted: target.mock.map { Int($0.statistics().connectionsAccepted) })
    }
}

extension Duration {
    var microseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000 + atto / 1_000_000_000_000
    }

    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
