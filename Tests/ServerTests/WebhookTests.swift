import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// Signed webhooks against the real binary, the real mock and a real receiver on
/// 127.0.0.1, on both stores: events are durable (written with the change), sent
/// until the receiver takes them, signed, and listed when they never got through.
@Suite(.serverPostgres) struct WebhookTests {
    static let secret = "whsec-test-0123456789abcdefghij"

    /// A server whose config sends every event to `receiver`, retrying quickly.
    static func server(_ store: ServerStore, production: MockServer?, receiver: WebhookReceiver,
                       retryHours: Int = 1, events: [String] = WebhookEventType.allCases.map(\.rawValue),
                       pollMillis: Int = 50, concurrency: Int = 8) async throws -> ServerProcess {
        var options = ServerProcess.Options()
        if store == .postgres {
            options.database = try await ServerPostgresTrait.newDatabase()
        }
        options.extraTopLevel = """
            webhooks:
              retry_hours: \(retryHours)
              backoff_base_ms: 100
              backoff_max_ms: 400
              timeout_ms: 30000
              poll_interval_ms: \(pollMillis)
              concurrency: \(concurrency)
              endpoints:
                - url: \(receiver.url)
                  secret_file: webhook.secret
                  events: [\(events.joined(separator: ", "))]
            """
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        chmod(server.scratch.file("webhook.secret", secret + "\n"), 0o600)
        return server
    }

    /// Whether `header` (t=…,v1=…) is the HMAC-SHA256 of "t.body" under the secret,
    /// computed here by openssl, not by the server's code.
    static func verifies(_ header: String?, body: [UInt8]) -> Bool {
        guard let header else { return false }
        var fields: [String: String] = [:]
        for part in header.split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { fields[String(kv[0])] = String(kv[1]) }
        }
        guard let t = fields["t"], let v1 = fields["v1"], Int(t) != nil else { return false }
        let hexKey = secret.utf8.map { String(format: "%02x", $0) }.joined()
        let r = runSync("/usr/bin/openssl", ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-hex"],
                        stdin: Data(Array("\(t).".utf8) + body))
        let expected = r.stdout.split(separator: "=").last?.trimmingCharacters(in: .whitespacesAndNewlines)
        return r.status == 0 && expected == v1
    }

    static func wait(_ what: String, timeout: TimeInterval = 120, _ done: () async throws -> Bool) async throws {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if try await done() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("timed out waiting for \(what)")
        throw CancellationError()
    }

    static func json(_ request: WebhookReceiver.Request) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any] ?? [:]
    }

    /// The receiver is down (connections refused) while the notification is sent,
    /// then answers 500 three times, then 200: every event arrives, each body
    /// verifies against its signature, and each event has its own id (a retry keeps it).
    @Test(arguments: ServerStore.allCases)
    func aReceiverDownThenFailingGetsEveryEventSigned(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 230)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let production = try Harness.mock(sandbox: false) {
            $0.unregistered = [t[1]: now + 3_600_000]
            $0.forced = [t[2]: .error(400, "DeviceTokenNotForTopic")]
        }
        defer { production.stop() }
        let receiver = WebhookReceiver(answers: [500, 500, 500])
        defer { receiver.stop() }
        let server = try await Self.server(store, production: production, receiver: receiver)
        try await server.start()
        defer { Task { await server.stop() } }
        for (i, token) in t.enumerated() { await BackendAPITests.register(server, user: "hook\(i)", token: token) }
        let id = try await WorkerTests.notify(server, users: ["hook0", "hook1", "hook2"])
        try await server.drained()

        // Down: the events wait, listed as pending, none failed.
        try await Self.wait("events pending after refused attempts") {
            let pending = await server.backend("GET", "/v1/webhook-events?state=pending").json["events"] as? [[String: Any]]
            return (pending ?? []).count == 5 && (pending ?? []).allSatisfy { ($0["attempts"] as? Int ?? 0) >= 1 }
        }
        #expect((await server.backend("GET", "/v1/webhook-events?state=failed").json["events"] as? [Any])?.isEmpty == true)

        receiver.up()
        try await Self.wait("every event delivered") {
            let delivered = await server.backend("GET", "/v1/webhook-events?state=delivered").json["events"] as? [Any]
            return delivered?.count == 5
        }
        let requests = receiver.requests
        #expect(requests.filter { $0.headers["x-test-answer"] == "500" }.count == 3)
        for request in requests {
            #expect(Self.verifies(request.headers["apns-server-signature"], body: request.body), "\(request.text)")
            #expect(request.headers["content-type"] == "application/json")
        }
        let bodies = requests.filter { $0.headers["x-test-answer"] == nil }.map(Self.json)
        // At least once: an attempt whose 2xx the worker did not see in time is sent again,
        // with its id. Each event counts once, by id.
        var byID: [String: [String: Any]] = [:]
        for body in bodies { if let id = body["id"] as? String { byID[id] = body } }
        var byType: [String: [[String: Any]]] = [:]
        for body in byID.values { byType[body["type"] as? String ?? "?", default: []].append(body) }
        #expect(byType["token.deactivated"]?.count == 2)
        #expect(byType["delivery.failed"]?.count == 2)
        #expect(byType["notification.completed"]?.count == 1)
        // Distinct per event; an event sent again (after a 500) keeps its id.
        let ids = bodies.compactMap { $0["id"] as? String }
        #expect(ids.count == bodies.count && Set(ids).count == 5 && ids.allSatisfy { $0.hasPrefix("evt_") })
        let retriedIDs = Set(requests.filter { $0.headers["x-test-answer"] != nil }.compactMap { Self.json($0)["id"] as? String })
        #expect(retriedIDs.isSubset(of: Set(ids)))

        let dead = try #require(byType["token.deactivated"]?.first { ($0["data"] as? [String: Any])?["token"] as? String == t[1] })
        let deadData = try #require(dead["data"] as? [String: Any])
        #expect(deadData["user_id"] as? String == "hook1")
        #expect(deadData["app_type"] as? String == "staff")
        #expect(deadData["reason"] as? String == "Unregistered")
        #expect(deadData["apns_timestamp"] as? String == isoTime(now + 3_600_000))
        let failed = try #require(byType["delivery.failed"]?.first { ($0["data"] as? [String: Any])?["token"] as? String == t[2] })
        let failedData = try #require(failed["data"] as? [String: Any])
        #expect(failedData["notification_id"] as? String == id)
        #expect(failedData["status"] as? Int == 400)
        #expect(failedData["reason"] as? String == "DeviceTokenNotForTopic")
        let completed = try #require(byType["notification.completed"]?.first?["data"] as? [String: Any])
        #expect(completed["notification_id"] as? String == id)
        #expect(completed["summary"] as? [String: Int] == ["delivered": 1, "failed": 2])

        // Nothing is left pending or failed, and the metrics say what happened.
        #expect((await server.backend("GET", "/v1/webhook-events?state=pending").json["events"] as? [Any])?.isEmpty == true)
        let metrics = await server.metrics().body
        #expect(metrics.contains(#"apns_server_webhook_deliveries_total{event="notification.completed",outcome="delivered"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"outcome="retry""#))
    }

    /// A worker with every slot busy claims the next event as soon as a send ends, not
    /// a poll later: ten events through one slot, polled every 5 s, arrive in far less
    /// than the ten polls (50 s) that waiting out the interval after each would take.
    @Test func aBusyWorkerClaimsTheNextEventAsSoonAsASendEnds() async throws {
        let t = Harness.tokens(10, seed: 240)
        let later = Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000
        let production = try Harness.mock(sandbox: false) {
            $0.unregistered = Dictionary(uniqueKeysWithValues: t.map { ($0, later) })
        }
        defer { production.stop() }
        let receiver = WebhookReceiver()
        receiver.up()
        defer { receiver.stop() }
        let server = try await Self.server(.sqlite, production: production, receiver: receiver,
                                           events: ["token.deactivated"], pollMillis: 5_000, concurrency: 1)
        try await server.start()
        defer { Task { await server.stop() } }
        for (i, token) in t.enumerated() { await BackendAPITests.register(server, user: "busy\(i)", token: token) }
        _ = try await WorkerTests.notify(server, users: (0..<10).map { "busy\($0)" })
        try await server.drained()
        try await Self.wait("ten events through one slot", timeout: 25) {
            let delivered = await server.backend("GET", "/v1/webhook-events?state=delivered").json["events"] as? [Any]
            return delivered?.count == 10
        }
        #expect(Set(receiver.requests.compactMap { Self.json($0)["id"] as? String }).count == 10)
    }

    /// Events are written with the change that causes them: a kill -9 as soon as the
    /// deliveries are final loses none (the receiver was down until then). A receiver
    /// that never answers 2xx within `retry_hours` (0 after the restart: one more
    /// attempt) leaves them `failed`, listed by `?state=failed`, a page at a time.
    @Test(arguments: ServerStore.allCases)
    func eventsSurviveKillNineAndFailedOnesAreListed(_ store: ServerStore) async throws {
        let t = Harness.tokens(2, seed: 231)
        let production = try Harness.mock(sandbox: false) {
            $0.forced = [t[0]: .error(400, "DeviceTokenNotForTopic"), t[1]: .error(400, "DeviceTokenNotForTopic")]
        }
        defer { production.stop() }
        let receiver = WebhookReceiver(answers: Array(repeating: 500, count: 100))
        defer { receiver.stop() }
        let server = try await Self.server(store, production: production, receiver: receiver, retryHours: 1,
                                           events: ["delivery.failed"])
        try await server.start()
        for (i, token) in t.enumerated() { await BackendAPITests.register(server, user: "kill\(i)", token: token) }
        _ = try await WorkerTests.notify(server, users: ["kill0", "kill1"])
        try await server.drained()
        await server.stop(SIGKILL)

        let config = try String(contentsOfFile: server.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: "retry_hours: 1\n", with: "retry_hours: 0\n")
            .write(toFile: server.configPath, atomically: true, encoding: .utf8)
        receiver.up()
        try await server.start()
        defer { Task { await server.stop() } }
        try await Self.wait("both events failed") {
            (await server.backend("GET", "/v1/webhook-events?state=failed").json["events"] as? [Any])?.count == 2
        }
        let first = await server.backend("GET", "/v1/webhook-events?state=failed&limit=1").json
        let page = try #require(first["events"] as? [[String: Any]])
        #expect(page.count == 1)
        #expect(page[0]["last_status"] as? Int == 500)
        #expect(page[0]["url"] as? String == receiver.url)
        #expect((page[0]["data"] as? [String: Any])?["reason"] as? String == "DeviceTokenNotForTopic")
        let next = try #require(first["next"] as? String)
        let second = await server.backend("GET", "/v1/webhook-events?state=failed&limit=1&after=\(next)").json
        #expect((second["events"] as? [[String: Any]])?.count == 1)
        #expect(second["next"] == nil)
        #expect((second["events"] as? [[String: Any]])?.first?["id"] as? String != page[0]["id"] as? String)
        #expect(await server.backend("GET", "/v1/webhook-events?state=lost").status == 400)
        #expect(await server.request("GET", "/v1/webhook-events").status == 401)
        // The gauge is counted on its own clock (metrics_refresh_ms: 100).
        try await Self.wait("the failed gauge") {
            await server.metrics().body.contains(#"apns_server_webhook_events{state="failed"} 2.0"#)
        }
    }
}

/// The API's time text, computed here independently of the server.
func isoTime(_ millis: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
}

/// A bad `webhooks` block stops the start (and `--check-config`) with one line, exit 2.
@Suite struct WebhookConfigTests {
    @Test func badWebhookConfigsExit2WithOneLine() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = """
            webhooks:
              - url: https://api.example.com/hooks/apns
                secret_file: webhook.secret
                events: [token.deactivated, delivery.failed]
            """
        let server = ServerProcess(sandbox: nil, production: nil, options: options)
        chmod(server.scratch.file("webhook.secret", WebhookTests.secret + "\n"), 0o600)
        _ = server.scratch.file("short.secret", "tiny-secret\n")
        let good = await ConfigTests.run(["--check-config", "--config", server.configPath])
        #expect(good.status == 0, "the base config is good: \(good.stderr)")
        let cases: [(String, [(String, String)], String)] = [
            ("unknown event", [("events: [token.deactivated, delivery.failed]", "events: [token.deactivated, delivery.bounced]")],
             "config: webhooks[0].events: unknown event 'delivery.bounced' (known: token.deactivated, delivery.failed, notification.completed, broadcast.completed)"),
            ("no events", [("events: [token.deactivated, delivery.failed]", "events: []")],
             "config: webhooks[0].events must be a non-empty list of event names"),
            ("not http", [("url: https://api.example.com/hooks/apns", "url: ftp://api.example.com/hooks")],
             "config: webhooks[0].url must be an http:// or https:// URL, not 'ftp://api.example.com/hooks'"),
            ("no host", [("url: https://api.example.com/hooks/apns", "url: https:///hooks")],
             "config: webhooks[0].url must be an http:// or https:// URL"),
            ("unreadable secret", [("secret_file: webhook.secret", "secret_file: missing.secret")],
             "config: webhooks[0].secret_file: cannot read \(server.scratch.path("missing.secret")): no such file"),
            ("short secret", [("secret_file: webhook.secret", "secret_file: short.secret")],
             "config: webhooks[0].secret_file: the secret in \(server.scratch.path("short.secret")) is shorter than 16 bytes"),
            ("unknown key", [("secret_file: webhook.secret", "secret_file: webhook.secret\n    retries: 3")],
             "config: unknown key webhooks[0].retries"),
            ("bad retry hours", [("webhooks:\n  - url: https://api.example.com/hooks/apns",
                                  "webhooks:\n  retry_hours: -1\n  endpoints:\n  - url: https://api.example.com/hooks/apns")],
             "config: webhooks.retry_hours must be an integer in 0...8760"),
        ]
        for (name, replace, expected) in cases {
            let path = try ConfigTests.config(server, replace)
            let r = await ConfigTests.run(["--config", path])
            #expect(r.status == 2, "\(name): \(r.status) \(r.stderr)")
            #expect(r.stderr == "apns-server: \(expected)\n" || (r.stderr.hasPrefix("apns-server: \(expected)")
                    && r.stderr.split(separator: "\n").count == 1), "\(name): \(r.stderr)")
            #expect(!r.stderr.contains(WebhookTests.secret) && !r.stderr.contains("tiny-secret"), "\(name): a secret is never quoted")
            let checked = await ConfigTests.run(["--check-config", "--config", path])
            #expect(checked.status == 2 && checked.stderr == r.stderr, "\(name): --check-config said \(checked.stderr)")
        }
    }
}
