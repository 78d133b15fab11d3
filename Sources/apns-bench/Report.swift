import APNs
import Foundation
import Histogram

/// The figures of one run, printed like h2load's summary or as one JSON object.
struct Report {
    let requests: Int
    let transport: String
    let connections: Int
    let streams: Int
    let payloadBytes: Int
    /// Where the one-batch loop ran (task or main); nil for the other workloads.
    let loop: String?
    /// From the first token to the last result.
    let seconds: Double
    /// From the last result to the end of `APNsClient.shutdown()`.
    let shutdownSeconds: Double
    let statuses: [Int: Int]
    let firstError: String?
    let latency: Histogram<UInt64>
    let userSeconds: Double
    let systemSeconds: Double
    let peakRSS: Int
    let statistics: Statistics
    /// The in-process mock's count of TCP connections: the server's side of connectionsOpened.
    let mockConnectionsAccepted: Int?
    /// The in-process mock's average HPACK bytes of a request's headers, past each
    /// connection's warm-up (`MockStatistics.headerWarmup` requests).
    let mockWarmHeaderBytes: Double?

    var mockInProcess: Bool { mockConnectionsAccepted != nil }

    var rate: Double { Double(requests) / seconds }
    var succeeded: Int { statuses[200] ?? 0 }
    /// CPU (user + sys) per 1,000 notifications, in milliseconds.
    var cpuPer1k: Double { (userSeconds + systemSeconds) * 1000 / Double(requests) * 1000 }

    static let percentiles: [(String, Double)] = [("p50", 50), ("p95", 95), ("p99", 99), ("p99.9", 99.9)]

    func text() -> String {
        let statusList = statuses.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
        var lines = [
            "apns-bench: \(transport), \(connections) connection(s) × \(streams) streams, payload \(payloadBytes) bytes"
                + (loop.map { ", batch loop on \($0 == "main" ? "the main actor" : "a detached task")" } ?? "")
                + (mockInProcess ? ", mock in this process (its CPU included)" : ""),
            String(format: "finished in %.2fs, %.2f req/s (then shutdown took %.2fs)", seconds, rate, shutdownSeconds),
            "requests: \(requests) total, \(succeeded) succeeded, \(requests - succeeded) failed; status: \(statusList)",
        ]
        if let firstError { lines.append("first failure: \(firstError)") }
        let p = Report.percentiles.map { "\($0.0) \(ms(latency.valueAtPercentile($0.1)))" }.joined(separator: "  ")
        lines.append("latency (ms): min \(ms(latency.min))  \(p)  max \(ms(latency.max))")
        lines.append(String(format: "cpu: user %.2fs, sys %.2fs = %.2f ms per 1k notifications",
                            userSeconds, systemSeconds, cpuPer1k))
        lines.append(String(format: "peak rss: %.1f MB", Double(peakRSS) / 1_048_576))
        lines.append("jwt signatures: \(statistics.jwtSignatures), connections opened: \(statistics.connectionsOpened), "
            + "peak streams: \(statistics.peakStreams), server max streams: \(statistics.serverMaxStreams)")
        if let mockConnectionsAccepted {
            lines.append("mock: \(mockConnectionsAccepted) connection(s) accepted"
                + (mockWarmHeaderBytes.map { String(format: "; request headers %.1f bytes each (HPACK, warm)", $0) } ?? ""))
        }
        return lines.joined(separator: "\n")
    }

    func json() -> String {
        var latencyUS: [String: UInt64] = ["min": latency.min, "max": latency.max]
        for (name, p) in Report.percentiles { latencyUS[name] = latency.valueAtPercentile(p) }
        let object: [String: Any] = [
            "requests": requests, "transport": transport, "connections": connections, "streams": streams,
            "payload_bytes": payloadBytes, "loop": loop as Any, "seconds": seconds, "shutdown_s": shutdownSeconds, "req_per_s": rate, "succeeded": succeeded,
            "statuses": Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), $0.value) }),
            "first_error": firstError as Any, "latency_us": latencyUS,
            "cpu_user_s": userSeconds, "cpu_sys_s": systemSeconds, "cpu_ms_per_1k": cpuPer1k,
            "peak_rss_bytes": peakRSS, "jwt_signatures": statistics.jwtSignatures,
            "connections_opened": statistics.connectionsOpened, "peak_streams": statistics.peakStreams,
            "mock_in_process": mockInProcess, "mock_connections_accepted": mockConnectionsAccepted as Any,
            "mock_header_bytes_warm": mockWarmHeaderBytes as Any,
        ]
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    private func ms(_ us: UInt64) -> String { String(format: "%.2f", Double(us) / 1000) }
}
