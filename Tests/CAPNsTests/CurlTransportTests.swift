import CAPNs
import Foundation
import Testing
import TestSupport

/// The libcurl transport against real local servers: nghttpd (HTTP/2 over TLS),
/// openssl s_server (HTTP/1 only), a listener that never answers, a closed port.
@Suite(.serialized) struct CurlTransportTests {
    @Test func aBatchCompletesExactlyOnceOverOneConnectionWithoutResets() async throws {
        let docroot = FileManager.default.temporaryDirectory.appendingPathComponent("capns-www-\(UUID())")
        try FileManager.default.createDirectory(at: docroot, withIntermediateDirectories: true)
        let server = try ServerProcess.nghttpd(docroot: docroot.path)
        let sender = try TestSender(port: server.port)
        let count = 3000

        await sender.submit(count: count)
        await sender.collector.wait(for: count)
        let stats = sender.stats
        await sender.destroy()
        let log = server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)) == Set((0..<count).map(UInt64.init)))
        // nghttpd answers 404 (no such file) with an HTML body: a real HTTP/2 answer.
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 404 })
        #expect(stats.connections_opened == 1)
        #expect(stats.connections_lost == 0)
        #expect(stats.requests_started == UInt64(count))
        #expect(stats.peak_streams > 1)
        // Rapid-reset protection would drop a connection after ~1000 resets; send none.
        let resets = log.components(separatedBy: "recv RST_STREAM").count - 1
        #expect(resets == 0)
        // Only the headers APNs wants: nothing curl adds by default (accept, content-type, expect).
        let sent = requestHeaderNames(in: log)
        #expect(sent == [":method", ":path", ":scheme", ":authority", "authorization", "apns-id",
                         "apns-topic", "apns-push-type", "apns-priority", "content-length"])
        #expect(log.contains(":path: /3/device/" + String(repeating: "ab", count: 32)))
    }

    @Test func anUntrustedCertificateFailsToConnect() async throws {
        let otherCA = FileManager.default.temporaryDirectory.appendingPathComponent("capns-other-ca-\(UUID()).pem")
        let made = runSync("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                "-nodes", "-days", "1", "-subj", "/CN=not the test CA",
                                                "-keyout", "/dev/null", "-out", otherCA.path])
        #expect(made.status == 0)
        let server = try ServerProcess.nghttpd(docroot: "/nonexistent")
        let sender = try TestSender(port: server.port, caFile: otherCA.path)
        await sender.submit(count: 3)
        await sender.collector.wait(for: 3)
        await sender.destroy()
        _ = server.stop()

        let completions = sender.collector.completions
        #expect(completions.count == 3)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.hasPrefix("127.0.0.1:\(server.port): "))
            #expect(c.error.contains("certificate"), "\(c.error)")
        }
    }

    @Test func aRefusedPortFailsToConnect() async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let port = closed.port
        let sender = try TestSender(port: port)
        await sender.submit(count: 2)
        await sender.collector.wait(for: 2)
        await sender.destroy()
        let completions = sender.collector.completions
        #expect(completions.count == 2)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_CONNECT_FAILED })
        #expect(completions.allSatisfy { $0.error.hasPrefix("127.0.0.1:\(port): ") })
    }

    @Test func aServerWithoutHTTP2IsRefusedBeforeAnythingIsSent() async throws {
        let server = try ServerProcess.http1Only()
        let sender = try TestSender(port: server.port)
        await sender.submit(count: 2)
        await sender.collector.wait(for: 2)
        await sender.destroy()
        _ = server.stop()
        let completions = sender.collector.completions
        #expect(completions.count == 2)
        for c in completions {
            #expect(c.outcome == CAPNS_CONNECT_FAILED)
            #expect(c.error.contains("HTTP/2"), "\(c.error)")
            #expect(c.error.hasPrefix("127.0.0.1:\(server.port): "))
        }
    }

    @Test func aServerThatNeverAnswersTimesOut() async throws {
        let listener = SilentListener()
        let sender = try TestSender(port: listener.port, connectTimeoutMs: 30000, requestTimeoutMs: 300)
        await sender.submit(count: 5)
        await sender.collector.wait(for: 5, seconds: 20)
        let stats = sender.stats
        await sender.destroy()
        let completions = sender.collector.completions
        #expect(completions.count == 5)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_TIMED_OUT })
        #expect(stats.timed_out == 5)
    }

    @Test func destroyCancelsEveryRequestInFlightExactlyOnce() async throws {
        let listener = SilentListener()
        let sender = try TestSender(port: listener.port, connectTimeoutMs: 30000, requestTimeoutMs: 30000)
        let count = 200
        await sender.submit(count: count)
        try await Task.sleep(for: .milliseconds(200))
        await sender.destroy()
        let completions = sender.collector.completions
        #expect(completions.count == count)
        #expect(Set(completions.map(\.tag)).count == count)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_CANCELLED })
    }
}

/// The header names nghttpd -v logged as received, e.g. "recv (stream_id=3) apns-id: ...".
func requestHeaderNames(in log: String) -> Set<String> {
    var names: Set<String> = []
    for line in log.split(separator: "\n") where line.contains("recv (stream_id=") {
        guard let close = line.firstIndex(of: ")") else { continue }
        let rest = line[line.index(after: close)...].drop { $0 == " " }
        if let colon = rest.dropFirst().firstIndex(of: ":") { names.insert(String(rest[..<colon])) }
    }
    return names
}
