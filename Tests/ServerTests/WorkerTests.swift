import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// The outbox worker's rules: what each APNs answer does to a delivery and its token.
/// The application in process (its worker sends to the mocks over TLS as the binary
/// does), except where the worker's timing across a lease is the point.
@Suite struct WorkerTests {
    static func notify(_ server: any APIServer, users: [String], type: String = "order_status_changed") async throws -> String {
        let ids = users.map { "\"\($0)\"" }.joined(separator: ",")
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"\#(type)","entity_type":"order","entity_id":"o1","app_type":"staff","user_ids":[\#(ids)],"alert":{"title":"t","body":"b"}}"#)
        #expect(r.status == 202, "\(r.body)")
        return try #require(r.json["notification_id"] as? String)
    }

    static func deliveries(_ server: any APIServer, _ id: String) async -> [String: [String: Any]] {
        let log = await server.backend("GET", "/v1/notifications/\(id)").json
        var byToken: [String: [String: Any]] = [:]
        for d in log["deliveries"] as? [[String: Any]] ?? [] { byToken[d["token"] as! String] = d }
        return byToken
    }

    static func tokenCount(_ server: any APIServer, user: String) async -> Int {
        (await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: user)).json["tokens"] as? [Any])?.count ?? -1
    }

    /// 410 deactivates a token registered before APNs' timestamp, not one registered since.
    /// DeviceTokenNotForTopic deactivates at once.
    @Test func deadTokens() async throws {
        let t = Harness.tokens(3, seed: 21)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let production = try Harness.mock(sandbox: false) {
            $0.unregistered = [t[0]: now + 3_600_000, t[1]: now - 3_600_000]
            $0.forced = [t[2]: .error(400, "DeviceTokenNotForTopic")]
        }
        defer { production.stop() }
        try await withServer(.sqlite, production: production) { server in
            for (i, token) in t.enumerated() { await BackendAPITests.register(server, user: "dead\(i)", token: token) }

            let id = try await Self.notify(server, users: ["dead0", "dead1", "dead2"])
            try await server.drained()
            let log = await Self.deliveries(server, id)
            #expect(log[t[0]]?["status"] as? Int == 410)
            #expect(log[t[0]]?["reason"] as? String == "Unregistered")
            #expect(log[t[0]]?["state"] as? String == "failed")
            #expect(log[t[1]]?["status"] as? Int == 410)
            #expect(log[t[2]]?["reason"] as? String == "DeviceTokenNotForTopic")
            let ts = try #require(log[t[0]]?["timestamp"] as? String)
            #expect(ts.hasSuffix("Z"))

            #expect(await Self.tokenCount(server, user: "dead0") == 0, "registered before the 410's timestamp: deactivated")
            #expect(await Self.tokenCount(server, user: "dead1") == 1, "re-registered after the 410's timestamp: kept")
            #expect(await Self.tokenCount(server, user: "dead2") == 0, "DeviceTokenNotForTopic: deactivated")

            // Nothing is sent to a deactivated token again.
            let again = await server.backend("POST", "/v1/notifications",
                #"{"type":"order_created","app_type":"staff","user_ids":["dead0","dead1","dead2"],"alert":{"title":"t","body":"b"}}"#)
            #expect(again.body.hasSuffix(#""deliveries":1,"skipped":{"preferences":0,"no_devices":2}}"#), "\(again.body)")
            try await server.drained()
            #expect(production.attempts(for: t[0]) == 1)
            #expect(production.attempts(for: t[2]) == 1)
            #expect(production.attempts(for: t[1]) == 2)
        }
    }

    /// BadDeviceToken may mean the other environment: tried there once with the same
    /// apns-id; success moves the token, a second BadDeviceToken deactivates it.
    @Test func badDeviceTokenTriesTheOtherEnvironmentOnce() async throws {
        let t = Harness.tokens(2, seed: 22)
        let production = try Harness.mock(sandbox: false) {
            $0.forced = [t[0]: .error(400, "BadDeviceToken"), t[1]: .error(400, "BadDeviceToken")]
        }
        let sandbox = try Harness.mock(sandbox: true) { $0.forced = [t[1]: .error(400, "BadDeviceToken")] }
        defer { production.stop(); sandbox.stop() }
        try await withServer(.sqlite, sandbox: sandbox, production: production) { server in
            await BackendAPITests.register(server, user: "moves", token: t[0])
            await BackendAPITests.register(server, user: "bad", token: t[1])

            let id = try await Self.notify(server, users: ["moves", "bad"])
            try await server.drained()
            let log = await Self.deliveries(server, id)
            let moved = try #require(log[t[0]])
            #expect(moved["state"] as? String == "delivered")
            #expect(moved["environment"] as? String == "sandbox")
            #expect(moved["attempts"] as? Int == 2)
            let apnsID = try #require(moved["apns_id"] as? String)
            #expect(production.recordedRequests().first { $0.token == t[0] }?.header("apns-id") == apnsID)
            #expect(sandbox.recordedRequests().first { $0.token == t[0] }?.header("apns-id") == apnsID, "same apns-id in both")

            let failed = try #require(log[t[1]])
            #expect(failed["state"] as? String == "failed")
            #expect(failed["reason"] as? String == "BadDeviceToken")
            #expect(production.attempts(for: t[1]) == 1 && sandbox.attempts(for: t[1]) == 1, "each environment once")
            #expect(await Self.tokenCount(server, user: "bad") == 0)
            #expect(await Self.tokenCount(server, user: "moves") == 1)

            // The moved token now goes to sandbox directly.
            _ = try await Self.notify(server, users: ["moves"])
            try await server.drained()
            #expect(sandbox.attempts(for: t[0]) == 2)
            #expect(production.attempts(for: t[0]) == 1)
        }
    }

    /// No answer (APNs unreachable) is not a final entry: back to the outbox with
    /// backoff, then delivered once APNs is there, with the same apns-id.
    @Test func noAnswerGoesBackToTheOutbox() async throws {
        let token = Harness.tokens(1, seed: 23)[0]
        // The server's production endpoint: at first an APNs that takes each request
        // and resets its connection, never answering; the real mock takes its port later
        // (a port left free could be taken by another test's mock, which would answer).
        let away = try Harness.mock(sandbox: false) { $0.resetAfter = 1 }
        let port = away.port
        var options = ServerProcess.Options()
        options.backoffBaseMillis = 100
        try await withServer(.sqlite, production: away, options: options) { server in
            await BackendAPITests.register(server, user: "later", token: token)
            let id = try await Self.notify(server, users: ["later"])
            let end = Date().addingTimeInterval(300)    // a hang guard: a loaded machine runs the worker late
            var attempts = 0
            while Date() < end {
                let d = await Self.deliveries(server, id)[token]
                #expect(d?["state"] as? String == "pending")
                attempts = d?["attempts"] as? Int ?? 0
                if attempts >= 2 { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(attempts >= 2, "released and tried again")
            away.stop()
            let production = try Harness.mock(sandbox: false) { $0.port = port }
            defer { production.stop() }
            try await server.drained()
            let d = try #require(await Self.deliveries(server, id)[token])
            #expect(d["state"] as? String == "delivered")
            #expect(production.recordedRequests().first?.header("apns-id") == d["apns_id"] as? String)
            #expect(production.attempts(for: token) == 1)
        }
    }
}

extension WorkerTests {
    /// A delivery whose answer takes longer than a lease keeps its lease: the worker
    /// loop that holds it renews it, so its sibling loop (claiming expired leases)
    /// never sends it a second time. Without renewals each would go out twice.
    /// The binary: its renewals keep time on threads of their own, not on the test
    /// process's two cooperative threads, which every other running test shares.
    @Test func aDeliveryWaitingLongerThanALeaseIsSentOnce() async throws {
        // Answers after more than two leases; renewals every half second keep at
        // least two seconds of lease, room for a loaded machine's late tick.
        let production = try Harness.mock(sandbox: false) { $0.latency = .seconds(7) }
        defer { production.stop() }
        var options = ServerProcess.Options()
        options.leaseSeconds = 3
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        try await server.start()
        defer { Task { await server.stop() } }
        let tokens = Harness.tokens(20, seed: 41)
        for (i, token) in tokens.enumerated() { await BackendAPITests.register(server, user: "slow-\(i)", token: token) }
        let id = try await Self.notify(server, users: tokens.indices.map { "slow-\($0)" })
        try await server.drained(timeout: 60)
        let deliveries = await Self.deliveries(server, id)
        for token in tokens {
            #expect(production.attempts(for: token) == 1, "sent once")
            #expect(deliveries[token]?["state"] as? String == "delivered")
            #expect(deliveries[token]?["attempts"] as? Int == 1)
        }
    }
}

/// Crash and shutdown: the outbox is the truth.
@Suite(.serialized) struct DurabilityTests {
    /// Registers one user of `company` per token (through the store: thousands of HTTP
    /// registrations would only slow the test), starts the server and sends one company
    /// notification; its id, once answered 202 with a delivery per token.
    static func startAndNotify(_ server: ServerProcess, company: String, tokens: [String]) async throws -> String {
        let store = try server.store()
        try await store.migrate()
        for (i, token) in tokens.enumerated() {
            _ = try await store.register([DeviceRegistration(userID: "\(company)-\(i)", companyID: company, token: token,
                                                         platform: "ios", appType: "staff")],
                                     maxActive: 20, now: Int64(Date().timeIntervalSince1970 * 1000))
        }
        try await server.start()
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"order_created","app_type":"staff","company_id":"\#(company)","alert":{"title":"t","body":"b"}}"#)
        #expect(r.status == 202)
        #expect(r.body.contains(#""deliveries":\#(tokens.count),"#))
        return try #require(r.json["notification_id"] as? String)
    }

    /// 5,000 deliveries, kill -9 mid-run, restart with a short lease: every delivery
    /// ends in exactly one final entry, and every resend carried the apns-id the
    /// delivery had before the crash.
    @Test func killNineAndRestart() async throws {
        // 50 streams at ~100 ms: about 500 answers a second, so the run lasts ~10 s and
        // the kill below lands mid-run however late a loaded machine lets the poll see
        // the 800th request (at 1,000 streams the whole run took one second).
        let production = try Harness.mock(sandbox: false) {
            $0.latency = .milliseconds(100)
            $0.jitter = .milliseconds(50)
            $0.recordCap = 20_000
            $0.maxStreams = 50
        }
        defer { production.stop() }
        var options = ServerProcess.Options()
        options.leaseSeconds = 2
        options.batchSize = 250
        // Planned in five parts and handed over a page at a time: what was handed
        // over page by page is what a restart must send once.
        options.fanOutPart = 1000
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        let count = 5000
        let tokens = Harness.tokens(count, seed: 31)
        let id = try await Self.startAndNotify(server, company: "crash-co", tokens: tokens)

        // Kill once the mock has answered part of the run.
        let end = Date().addingTimeInterval(60)
        while production.statistics().requests < 800 && Date() < end { try await Task.sleep(for: .milliseconds(20)) }
        let killed = await server.stop(SIGKILL)
        #expect(killed == SIGKILL)
        let before = production.recordedRequests()
        #expect(before.count < count, "killed mid-run (\(before.count) sent)")
        let store = try server.store()
        let pendingAfterCrash = try await store.outboxDepth()
        #expect(pendingAfterCrash > 0)

        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 120)
        let log = await server.backend("GET", "/v1/notifications/\(id)?limit=10000").json
        let summary = try #require(log["summary"] as? [String: Int])
        #expect(summary == ["pending": 0, "delivered": count, "failed": 0])
        let deliveries = try #require(log["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == count, "one entry per delivery")
        var apnsIDByToken: [String: String] = [:]
        for d in deliveries { apnsIDByToken[d["token"] as! String] = d["apns_id"] as? String }
        #expect(Set(apnsIDByToken.keys) == Set(tokens))

        let all = production.recordedRequests()
        var resent = 0
        var seen: [String: Int] = [:]
        for request in all {
            let token = try #require(request.token)
            #expect(request.header("apns-id") == apnsIDByToken[token], "a resend carries the same apns-id")
            seen[token, default: 0] += 1
        }
        resent = seen.values.filter { $0 > 1 }.count
        #expect(seen.count == count, "every delivery was sent")
        // The in-flight ones at the kill may go twice (same apns-id); no more than that.
        #expect(seen.values.allSatisfy { $0 <= 2 })
        print("kill -9: \(before.count) sent before the kill, \(pendingAfterCrash) pending after it, \(resent) resent")
    }

    /// A fan-out is handed to a worker loop leased in the enqueue's own transaction.
    /// SIGTERM mid-run gives back what the loop was handed and never sent: free in the
    /// outbox at once, so the next process sends it without waiting for the lease
    /// (here 10 minutes, far beyond the drain's deadline) to run out.
    @Test func sigtermGivesBackWhatWasHandedOverAndNeverSent() async throws {
        let production = try Harness.mock(sandbox: false) {
            $0.latency = .milliseconds(200)
            $0.maxStreams = 50
            $0.recordCap = 10_000
        }
        defer { production.stop() }
        var options = ServerProcess.Options()
        options.leaseSeconds = 600
        options.batchSize = 100
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        let count = 3000
        let tokens = Harness.tokens(count, seed: 33)
        let id = try await Self.startAndNotify(server, company: "handoff-co", tokens: tokens)
        let end = Date().addingTimeInterval(60)
        while production.recordedRequests().isEmpty && Date() < end { try await Task.sleep(for: .milliseconds(10)) }
        let status = await server.stop(SIGTERM)
        #expect(status == 0, "\(server.stderr)")
        let sentBefore = Set(production.recordedRequests().compactMap(\.token)).count
        let pending = try await server.store().outboxDepth()
        #expect(sentBefore < count && pending == count - sentBefore, "\(sentBefore) sent, \(pending) pending")

        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained(timeout: 180)
        let log = await server.backend("GET", "/v1/notifications/\(id)?limit=10000").json
        #expect(log["summary"] as? [String: Int] == ["pending": 0, "delivered": count, "failed": 0])
        #expect(Set(production.recordedRequests().compactMap(\.token)) == Set(tokens))
    }

    /// SIGTERM: the HTTP server stops, the worker finishes what it sent, the clients
    /// close; exit 0 and nothing in flight lost.
    @Test func sigtermDrains() async throws {
        let production = try Harness.mock(sandbox: false) { $0.latency = .milliseconds(800) }
        defer { production.stop() }
        let server = ServerProcess(sandbox: nil, production: production)
        try await server.start()
        let tokens = Harness.tokens(50, seed: 32)
        for (i, token) in tokens.enumerated() { await BackendAPITests.register(server, user: "d\(i)", token: token) }
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"order_created","app_type":"staff","user_ids":[\#((0..<50).map { "\"d\($0)\"" }.joined(separator: ","))],"alert":{"title":"t","body":"b"}}"#)
        #expect(r.status == 202)
        let end = Date().addingTimeInterval(120)
        while production.recordedRequests().isEmpty && Date() < end { try await Task.sleep(for: .milliseconds(10)) }
        let status = await server.stop(SIGTERM)
        #expect(status == 0, "\(server.stderr)")
        #expect(!canConnect(server.port))
        let store = try server.store()
        let sent = Set(production.recordedRequests().compactMap(\.token))
        // Every request that went out has its answer recorded; the rest wait in the outbox.
        let pending = try await store.outboxDepth()
        #expect(pending == tokens.count - sent.count, "\(sent.count) sent, \(pending) pending")
        for token in sent {
            let d = try #require(await store.delivery(apnsID: production.recordedRequests().first { $0.token == token }!.header("apns-id")!))
            #expect(d.state == "delivered")
        }
    }
}

/// A provider key restricted to the other environment is the operator's error, not
/// the device's: the token stays, the delivery waits in the outbox, an alert metric
/// rises, and once the key is accepted the delivery goes with its original apns-id.
@Suite struct KeyRefusedWorkerTests {
    @Test func aKeyRefusedForTheEnvironmentKeepsTheTokenAndTheDelivery() async throws {
        let token = Harness.tokens(1, seed: 71)[0]
        let refusing = try Harness.mock(sandbox: false) { $0.keyEnvironments = [Harness.pki.keyID: .sandbox] }
        let answering = try Harness.mock(sandbox: false)
        defer { refusing.stop(); answering.stop() }
        let server = ServerProcess(sandbox: nil, production: refusing)
        try await server.start()
        await BackendAPITests.register(server, user: "keyed", token: token)
        let id = try await WorkerTests.notify(server, users: ["keyed"])

        // Hang guard only: the refusal comes with the first attempt.
        let end = Date().addingTimeInterval(60)
        var metrics = ""
        while Date() < end {
            metrics = await server.metrics().body
            if metrics.contains("apns_server_key_refused_total{") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(metrics.contains(#"apns_server_key_refused_total{app="staff",reason="BadEnvironmentKeyIdInToken"}"#),
                "\(metrics.split(separator: "\n").filter { $0.contains("key_refused") })")
        let waiting = await WorkerTests.deliveries(server, id)[token]
        #expect(waiting?["state"] as? String == "pending", "\(String(describing: waiting))")
        #expect(await WorkerTests.tokenCount(server, user: "keyed") == 1, "the token is kept")
        #expect(refusing.attempts(for: token) >= 1)
        let apnsID = try #require(waiting?["apns_id"] as? String)
        #expect(await server.stop() == 0)

        // The operator fixes the key (here: an APNs that accepts it) and starts again.
        try server.retarget(production: answering)
        try await server.start()
        defer { Task { await server.stop() } }
        try await server.drained()
        let sent = await WorkerTests.deliveries(server, id)[token]
        #expect(sent?["status"] as? Int == 200, "\(String(describing: sent))")
        #expect(sent?["apns_id"] as? String == apnsID)
        #expect(answering.attempts(for: token) == 1)
    }
}
