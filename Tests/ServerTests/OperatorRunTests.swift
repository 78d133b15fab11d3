import APNsMock
import Foundation
import Testing
import TestSupport

/// What an operator sees of a real run: the real binary with `log_format: json` at
/// `log_level: debug`, through what a day brings (registrations by the backend and by
/// an app, a refused user token, a notification that fans out to a delivered token, a
/// dead one, a refused key, a refused topic, an APNs that does not answer; webhooks that
/// fail before they get through; a scrape). Its log and its last `/metrics` scrape are read by both tests.
@Suite struct OperatorRunTests {
    static let webhookSecret = "whsec-operator-0123456789abcdefghij"
    /// In the payload only: a log line holding it holds a payload.
    static let alertBody = "payload-body-7f3c-never-logged"

    struct Run: Sendable {
        let stderr: String
        let metrics: String
        /// The user JWTs the run sent (each a secret a log must not hold).
        let jwts: [String]
    }

    static let run = Task<Run, any Error> { try await makeRun() }

    static func makeRun() async throws -> Run {
        let t = Harness.tokens(6, seed: 91)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let production = try Harness.mock(sandbox: false) {
            $0.unregistered = [t[1]: now + 3_600_000]
            $0.forced = [t[2]: .error(403, "InvalidProviderToken"), t[3]: .error(403, "BadEnvironmentKeyIdInToken"),
                         t[5]: .error(400, "TopicDisallowed")]
        }
        defer { production.stop() }
        // Its first three answers are 500 (at least two of them to delivery.failed events,
        // of which there are four), then 200: both outcomes show.
        let receiver = WebhookReceiver(answers: [500, 500, 500])
        receiver.up()
        defer { receiver.stop() }
        var options = ServerProcess.Options()
        options.logLevel = "debug"
        options.maxAttempts = 2
        options.extraTopLevel = """
            log_format: json
            webhooks:
              retry_hours: 1
              backoff_base_ms: 100
              backoff_max_ms: 400
              poll_interval_ms: 50
              endpoints:
                - url: \(receiver.url)
                  secret_file: webhook.secret
                  events: [token.deactivated, delivery.failed]
            """
        // No sandbox mock: the sandbox endpoint is a port nothing listens on (no answer).
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        chmod(server.scratch.file("webhook.secret", webhookSecret + "\n"), 0o600)
        try await server.start()
        defer { Task { await server.stop() } }

        for i in [0, 1, 2, 3, 5] { await BackendAPITests.register(server, user: "op\(i)", token: t[i]) }
        let appJWT = Harness.jwt(sub: "op4")
        let registered = await server.request("POST", "/api/user/device-token", body:
            #"{"deviceToken":"\#(t[4])","platform":"ios","appType":"staff","environment":"sandbox"}"#, bearer: appJWT)
        #expect(registered.status == 200, "\(registered.body)")
        let forged = Harness.jwt(sub: "op4", secret: "not-the-secret-not-the-secret-0123456789")
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: forged).status == 401)
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: appJWT).status == 200)
        #expect(await server.request("GET", "/v1/notifications/nope", bearer: "not-an-api-key-0123456789").status == 401)

        // The refused key goes on its own, once the rest is done: a refusal ends every
        // request of its lane not yet sent, so beside the others it could end the
        // InvalidProviderToken's retry with its own reason.
        for users in [#""op0","op1","op2","op4","op5""#, #""op3""#] {
            let r = await server.backend("POST", "/v1/notifications", #"""
                {"type":"order_status_changed","entity_type":"order","entity_id":"o1","app_type":"staff",
                 "user_ids":[\#(users)],"alert":{"title":"t","body":"\#(alertBody)"}}
                """#)
            #expect(r.status == 202, "\(r.body)")
            try await server.drained()
        }
        // Hang guard only: the webhooks' attempts follow the deliveries' answers.
        let end = Date().addingTimeInterval(60)
        var metrics = ""
        while Date() < end {
            metrics = await server.metrics().body
            if metrics.contains(#"apns_server_webhook_deliveries_total{event="delivery.failed",outcome="retry"}"#)
                && metrics.contains(#"apns_server_webhook_deliveries_total{event="delivery.failed",outcome="delivered"}"#)
                && metrics.contains(#"apns_server_webhook_events{state="pending"} 0"#) { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(await server.stop() == 0)
        return Run(stderr: server.stderr, metrics: metrics, jwts: [appJWT, forged])
    }

    /// Every line is one JSON object with time, level and message; the deliveries'
    /// lines carry their notification_id, apns_id, app and reason; no line holds an API
    /// key, the JWT secret, a user JWT (or its signature), the provider key, the webhook
    /// secret or a payload.
    @Test func jsonLogsParseAndHoldNoSecret() async throws {
        let run = try await Self.run.value
        let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        #expect(lines.count >= 10, "\(run.stderr)")
        #expect(run.stderr.hasSuffix("\n"))
        var objects: [[String: Any]] = []
        for line in lines {
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil, "not one JSON object: \(line)")
            guard let object else { continue }
            #expect(object.values.allSatisfy { $0 is String }, "\(line)")
            let time = object["time"] as? String ?? ""
            #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(line)")
            #expect(["trace", "debug", "info", "notice", "warning", "error", "critical"].contains(object["level"] as? String ?? ""),
                    "\(line)")
            #expect(!(object["message"] as? String ?? "").isEmpty, "\(line)")
            objects.append(object)
        }

        let key = try String(contentsOfFile: Harness.pki.keyPath, encoding: .utf8)
        let keyLines = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }.map(String.init)
        var secrets = [Harness.apiKey, Harness.jwtSecret, Self.webhookSecret, Self.alertBody] + keyLines
        for jwt in run.jwts { secrets += [jwt, String(jwt.split(separator: ".")[2])] }
        for line in lines {
            for secret in secrets { #expect(!line.contains(secret), "a secret or a payload in: \(line)") }
            #expect(!line.contains(#"\"aps\""#) && !line.contains("alert"), "a payload in: \(line)")
        }

        func logged(_ message: String, reason: String? = nil) -> [[String: Any]] {
            objects.filter { $0["message"] as? String == message && (reason == nil || $0["reason"] as? String == reason) }
        }
        let accepted = logged("notification accepted")
        #expect(accepted.map { $0["deliveries"] as? String } == ["5", "1"] && accepted.allSatisfy { $0["app"] as? String == "staff" })
        let ids = accepted.compactMap { $0["notification_id"] as? String }
        try #require(ids.count == 2)
        for (reason, notificationID) in [("Unregistered", ids[0]), ("InvalidProviderToken", ids[0]), ("NoAnswer", ids[0]),
                                         ("TopicDisallowed", ids[0]), ("BadEnvironmentKeyIdInToken", ids[1])] {
            let failed = logged("delivery failed", reason: reason)
            #expect(failed.count == 1, "\(reason): \(failed)")
            #expect(failed.first?["notification_id"] as? String == notificationID && failed.first?["app"] as? String == "staff"
                    && (failed.first?["apns_id"] as? String)?.count == 36, "\(reason): \(failed)")
        }
        let refused = logged("APNs refused the app's provider key for this environment")
        #expect(!refused.isEmpty && refused.allSatisfy { $0["reason"] as? String == "BadEnvironmentKeyIdInToken" }, "\(refused)")
        #expect(logged("delivered").count == 1)
    }

    /// The series `promtool test rules` feeds the alert rules
    /// (examples/prometheus/apns-server-rules.test.yml) are the server's own: every one,
    /// with its labels, is on this run's `/metrics` (Prometheus's `up` aside).
    @Test func theAlertRulesTestSeriesAreOnTheServersMetrics() async throws {
        let run = try await Self.run.value
        let path = Package.root.appendingPathComponent("examples/prometheus/apns-server-rules.test.yml").path
        let tests = try String(contentsOfFile: path, encoding: .utf8)
        let series = Set(tests.matches(of: /series:\s*'([^']+)'/).map { String($0.1) })
        #expect(series.count >= 8, "\(series)")
        let scraped = Set(run.metrics.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap {
            Self.parse(String($0.split(separator: " ").dropLast().joined(separator: " ")))
        })
        for s in series {
            guard var wanted = Self.parse(s), wanted.name != "up" else { continue }
            wanted.labels.removeValue(forKey: "job")
            wanted.labels.removeValue(forKey: "instance")
            #expect(scraped.contains(wanted), "\(s) is not on /metrics: \(run.metrics)")
        }
    }

    struct Series: Hashable {
        var name: String
        var labels: [String: String]
    }

    /// `name{a="x",b="y"}` (label values without commas or quotes, as the service's are).
    static func parse(_ text: String) -> Series? {
        guard let match = text.wholeMatch(of: /([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?/) else { return nil }
        var labels: [String: String] = [:]
        for pair in (match.2.map(String.init) ?? "").split(separator: ",") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            labels[String(parts[0]).trimmingCharacters(in: .whitespaces)] = String(parts[1]).trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        }
        return Series(name: String(match.1), labels: labels)
    }
}
