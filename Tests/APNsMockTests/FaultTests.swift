import APNsMock
import Foundation
import Testing
import TestSupport

/// Faults and shaping, seen by independent HTTP/2 clients (curl, nghttp, h2load,
/// openssl s_client) and by the mock's own counters.
@Suite struct FaultTests {
    let auth = ["-H", "authorization: bearer \(Fixture.goodJWT)", "-H", "apns-topic: \(Fixture.pki.topic)",
                "-H", "apns-push-type: alert"]

    func payloadFile() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("payload-\(UUID().uuidString).json")
        try Fixture.payload.write(to: url)
        return url.path
    }

    func url(_ mock: MockServer, _ token: String = Fixture.token) -> String {
        "https://127.0.0.1:\(mock.port)/3/device/\(token)"
    }

    /// nghttp -v: every request on one connection, frames printed.
    func nghttp(_ mock: MockServer, requests: Int) throws -> String {
        let body = try payloadFile()
        defer { try? FileManager.default.removeItem(atPath: body) }
        // Distinct tokens: nghttp fetches a repeated URI once.
        let urls = (0..<requests).map { url(mock, String(repeating: "ab", count: 31) + String(format: "%02x", $0)) }
        return runSync("/usr/bin/nghttp", ["-nv", "-d", body] + auth + urls, timeout: 30).stdout
    }

    /// The values of SETTINGS_MAX_CONCURRENT_STREAMS the client received, in order:
    /// from the lines of each "recv SETTINGS frame" up to the next frame line.
    func advertisedLimits(_ nghttpOutput: String) -> [Int] {
        var limits: [Int] = [], inReceivedSettings = false
        for line in nghttpOutput.components(separatedBy: "\n") {
            if line.contains(" frame <") { inReceivedSettings = line.contains("recv SETTINGS frame") }
            guard inReceivedSettings, let r = line.range(of: "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") else { continue }
            limits.append(Int(line[r.upperBound...].prefix { $0.isNumber }) ?? -1)
        }
        return limits
    }

    @Test("\"with token auth only 1 stream until the first request with a valid provider token succeeds\"")
    func streamLimitRaisedAfterFirstSuccess() throws {
        let mock = try Fixture.mock { $0.maxStreams = 1500 }
        let out = try nghttp(mock, requests: 3)
        // The initial SETTINGS, and the raise after the first 200 (the client's own SETTINGS are "send").
        #expect(advertisedLimits(out) == [1, 1500])
        // nghttp may open all three before it reads SETTINGS: the extra ones are refused
        // (RST_STREAM REFUSED_STREAM, "not processed"), the rest answered.
        let answered = out.components(separatedBy: ":status: 200").count - 1
        let refused = out.components(separatedBy: "recv RST_STREAM").count - 1
        #expect(answered >= 1 && answered + refused == 3)
        #expect(mock.statistics().byStatus[200] == UInt64(answered))
    }

    @Test("GOAWAY after N: NO_ERROR, last-stream-id is the Nth stream, later streams are not processed")
    func goaway() throws {
        // nghttp sends its burst before reading SETTINGS: let the mock take it all.
        let mock = try Fixture.mock { $0.goawayAfter = 3; $0.initialStreams = 100 }
        let out = try nghttp(mock, requests: 6)
        let opened = out.components(separatedBy: "\n").compactMap { line -> String? in
            guard line.contains("send HEADERS frame"), let r = line.range(of: "stream_id=") else { return nil }
            return String(line[r.upperBound...].prefix { $0.isNumber })
        }
        #expect(opened.count == 6)
        #expect(out.contains("last_stream_id=\(opened[2]), error_code=NO_ERROR(0x00)"))
        #expect(out.components(separatedBy: ":status: 200").count - 1 == 3)
        let s = mock.statisticsWhenIdle()
        #expect(s.goawaysSent == 1)
        #expect(s.streams == 3)
        #expect(s.byStatus[200] == 3)
        #expect(s.connectionsCurrent == 0)      // closed once the three were answered
    }

    @Test("GOAWAY repeats on every connection: curl moves to a new one and every request is answered")
    func goawayEveryConnection() throws {
        let mock = try Fixture.mock { $0.goawayAfter = 2; $0.recordRequests = true }
        let (answers, _) = curl(mock.port, Array(repeating: Request(), count: 5))
        #expect(answers.map(\.status) == [200, 200, 200, 200, 200])
        let s = mock.statistics()
        #expect(s.connectionsAccepted == 3)
        #expect(s.goawaysSent == 2)
        #expect(mock.recordedRequests().map(\.connectionID) == [1, 1, 2, 2, 3])
    }

    @Test("Reset after N: the Nth request gets a TCP reset instead of an answer")
    func reset() throws {
        let mock = try Fixture.mock { $0.resetAfter = 2; $0.recordRequests = true }
        // curl sends a request lost with a reused connection again on a new one.
        let (answers, _) = curl(mock.port, [Request(), Request()])
        #expect(answers.map(\.status) == [200, 200])
        let s = mock.statistics()
        #expect(s.resetsDone == 1)
        #expect(s.connectionsAccepted == 2)
        #expect(s.streams == 3)
        #expect(s.requests == 2)
        #expect(mock.recordedRequests().map(\.connectionID) == [1, 2])   // the reset one is not kept
    }

    @Test("SETTINGS drop after N to M, restored K requests later")
    func settingsDrop() throws {
        let mock = try Fixture.mock { $0.settingsDrop = .init(after: 2, to: 1, restoreAfter: 1) }
        let (answers, _) = curl(mock.port, Array(repeating: Request(), count: 4))
        #expect(answers.map(\.status) == [200, 200, 200, 200])
        #expect(mock.statistics().settingsSent == 3)     // raise, drop, restore

        let dropOnly = try Fixture.mock { $0.settingsDrop = .init(after: 1, to: 7) }
        let out = try nghttp(dropOnly, requests: 2)
        #expect(advertisedLimits(out) == [1, 7])    // the drop wins over the raise
    }

    @Test("setMaxStreams sends SETTINGS to open connections")
    func runtimeLimit() async throws {
        let mock = try Fixture.mock()
        async let done = run("/usr/bin/curl", curlArgs(mock, count: 2) + ["--rate", "30/m"])
        // Polled on a thread of its own: the suite's blocking tests can stall the async
        // pool for longer than curl's 2 s gap between its two requests.
        let lower = Thread {
            while mock.statistics().byStatus[200] == nil { usleep(5_000) }
            mock.setMaxStreams(10)
        }
        lower.start()
        let result = await done
        #expect(result.status == 0)
        #expect(mock.statistics().settingsSent == 2)     // the raise to 1000, then to 10
    }

    func curlArgs(_ mock: MockServer, count: Int) -> [String] {
        var args: [String] = []
        for i in 0..<count {
            if i > 0 { args.append("--next") }
            args += ["-sS", "-o", "/dev/null", "--http2", "--cacert", Fixture.pki.caFile, "-d", "{}"] + auth
            args.append(url(mock))
        }
        return args
    }

    @Test("Latency delays answers without blocking others")
    func latency() throws {
        let mock = try Fixture.mock { $0.latency = .milliseconds(300) }
        let clock = ContinuousClock()
        let start = clock.now
        let (answers, _) = curl(mock.port, [Request(), Request()])
        #expect(answers.map(\.status) == [200, 200])
        #expect(clock.now - start >= .milliseconds(600))
    }

    @Test("Stall: requests are read and never answered, so the client's deadline fires")
    func stall() async throws {
        let mock = try Fixture.mock { $0.stall = true }
        let (answers, status) = await offPool { curl(mock.port, [Request()], extra: ["--max-time", "1"]) }
        #expect(answers.isEmpty)
        #expect(status == 28)   // curl: operation timed out
        let s = mock.statistics()
        #expect(s.streams == 1)
        #expect(s.requests == 0)
    }

    @Test("Stall after N: the first N requests are answered, later ones are read, kept and never answered")
    func stallAfter() async throws {
        let mock = try Fixture.mock { $0.stallAfter = 2; $0.recordRequests = true }
        let (answers, status) = await offPool { curl(mock.port, Array(repeating: Request(), count: 3), extra: ["--max-time", "1"]) }
        #expect(answers.map(\.status) == [200, 200])
        #expect(status == 28)   // curl: operation timed out
        #expect(mock.statistics().requests == 2)
        #expect(mock.recordedRequests().map(\.status) == [200, 200, 0])
        // The count is the whole mock's: a new connection's first request stalls too.
        let (later, _) = await offPool { curl(mock.port, [Request()], extra: ["--max-time", "1"]) }
        #expect(later.isEmpty)
        #expect(mock.recordedRequests().count == 4)
    }

    @Test("Idle timeout: GOAWAY, then the connection is closed")
    func idleTimeout() async throws {
        let mock = try Fixture.mock { $0.idleTimeout = .milliseconds(300) }
        // s_client with -ign_eof waits until the server closes.
        let r = await run("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(mock.port)", "-alpn", "h2",
                                             "-CAfile", Fixture.pki.caFile, "-ign_eof", "-quiet"], timeout: 20)
        #expect(r.status != SIGTERM)    // returned by itself, not killed by runSync's timeout
        #expect(r.stdout.contains(#"{"reason":"IdleTimeout"}"#))   // the GOAWAY's debug data, raw
        let s = mock.statisticsWhenIdle()
        #expect(s.goawaysSent == 1)
        #expect(s.connectionsCurrent == 0)
    }

    @Test("The 500-after-long-idle quirk answers the first request after idle with 500")
    func idle500() async throws {
        let mock = try Fixture.mock { $0.idle500After = .seconds(1) }
        let (answers, _) = await offPool { curl(mock.port, [Request(), Request(), Request()], extra: ["--rate", "40/m"]) }
        #expect(answers.map(\.status) == [200, 500, 500])
        #expect(answers[1].reason == "InternalServerError")
    }

    /// Runs h2load on a fresh mock with the given failure rates and seed; the mock's counts.
    func failureRun(seed: UInt64) async throws -> MockStatistics {
        let mock = try Fixture.mock { $0.failureRates = [429: 0.2, 500: 0.1, 503: 0.1]; $0.seed = seed }
        let body = try payloadFile()
        defer { try? FileManager.default.removeItem(atPath: body) }
        // One stream at a time: a burst before the client sees SETTINGS would be partly
        // refused, and how much is timing, not seed.
        let r = await run("/usr/bin/h2load", ["-n", "1000", "-c", "1", "-m", "1", "-d", body] + auth + [url(mock)],
                          timeout: 30)
        #expect(r.stdout.contains("1000 done"))
        #expect(r.stdout.contains("0 errored"))
        return mock.statistics()
    }

    @Test("Fraction-based 429/500/503 answers, the same under the same seed")
    func failureRates() async throws {
        let a = try await failureRun(seed: 42), b = try await failureRun(seed: 42), c = try await failureRun(seed: 7)
        #expect(a.byStatus == b.byStatus)
        #expect(a.byStatus != c.byStatus)
        let tooMany = a.byStatus[429] ?? 0, serverError = a.byStatus[500] ?? 0, unavailable = a.byStatus[503] ?? 0
        #expect((120...280).contains(tooMany))
        #expect((40...160).contains(serverError))
        #expect((40...160).contains(unavailable))
        #expect(a.byReason["TooManyRequests"] == tooMany)
        #expect(a.byReason["ServiceUnavailable"] == unavailable)
    }
}
