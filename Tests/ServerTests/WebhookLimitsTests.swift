import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// What a receiver can make the webhook worker do, on both stores: a slow one holds
/// a slot for `timeout_ms` at most, never gets an event twice at once, delays no
/// other receiver's events and no shutdown past its grace; and a receiver's URL is
/// never shown with what may be a secret in it.
@Suite(.serverPostgres) struct WebhookLimitsTests {
    /// A server sending `delivery.failed` to each of `receivers` (URL as given).
    static func server(_ store: ServerStore, production: MockServer, urls: [String], timeoutMillis: Int,
                       concurrency: Int, extra: String = "", logLevel: String = "warning") async throws -> ServerProcess {
        var options = ServerProcess.Options()
        if store == .postgres {
            options.database = try await ServerPostgresTrait.newDatabase()
        }
        options.logLevel = logLevel
        let endpoints = urls.map { """
                - url: \($0)
                  secret_file: webhook.secret
                  events: [delivery.failed]
            """ }.joined(separator: "\n")
        options.extraTopLevel = """
            \(extra)
            webhooks:
              retry_hours: 1
              backoff_base_ms: 100
              backoff_max_ms: 400
              timeout_ms: \(timeoutMillis)
              poll_interval_ms: 50
              concurrency: \(concurrency)
              endpoints:
            \(endpoints)
            """
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        chmod(server.scratch.file("webhook.secret", WebhookTests.secret + "\n"), 0o600)
        return server
    }

    /// `count` users whose deliveries fail: one `delivery.failed` event each, per receiver.
    static func failDeliveries(_ server: ServerProcess, _ tokens: [String]) async throws {
        for (i, token) in tokens.enumerated() { await BackendAPITests.register(server, user: "f\(i)", token: token) }
        _ = try await WorkerTests.notify(server, users: tokens.indices.map { "f\($0)" })
        try await server.drained()
    }

    static func mock(_ tokens: [String]) throws -> MockServer {
        try Harness.mock(sandbox: false) {
            $0.forced = Dictionary(uniqueKeysWithValues: tokens.map { ($0, .error(400, "DeviceTokenNotForTopic")) })
        }
    }

    static func events(_ server: ServerProcess, _ state: String) async -> [[String: Any]] {
        await server.backend("GET", "/v1/webhook-events?state=\(state)&limit=100").json["events"] as? [[String: Any]] ?? []
    }

    /// The client's timeout ended when the answer's head arrived: a receiver that
    /// answered 200 and then trickled its body held the send forever, its lease ran
    /// out, it was claimed again until it held every slot, and the other receiver's
    /// events waited. Now each attempt ends within timeout_ms (a 200 head counts as
    /// the answer): every event of both receivers is delivered within seconds.
    @Test(arguments: ServerStore.allCases)
    func aTricklingReceiverHoldsASlotForTimeoutMsOnly(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 251)
        let production = try Self.mock(t)
        defer { production.stop() }
        let slow = WebhookReceiver(trickling: true), fast = WebhookReceiver()
        slow.up()
        fast.up()
        defer { slow.stop(); fast.stop() }
        let server = try await Self.server(store, production: production, urls: [slow.url, fast.url],
                                           timeoutMillis: 1_000, concurrency: 2)
        try await server.start()
        defer { Task { await server.stop() } }
        try await Self.failDeliveries(server, t)

        try await WebhookTests.wait("every event delivered, the slow receiver's too", timeout: 20) {
            await Self.events(server, "delivered").count == 6
        }
        #expect(fast.requests.count == 3)
        let slowIDs = slow.requests.compactMap { WebhookTests.json($0)["id"] as? String }
        // The receiver reads one connection at a time: an event that waited behind
        // another's trickle past timeout_ms went again, after that attempt ended.
        #expect(Set(slowIDs).count == 3, "\(slowIDs)")
        #expect(await Self.events(server, "pending").isEmpty)
    }

    /// A send in flight at SIGTERM held the shutdown for as long as the receiver
    /// trickled (35 s seen). Past the grace it is cut short: the process exits 0
    /// within the grace and a little, and the event goes again later.
    @Test(arguments: ServerStore.allCases)
    func aShutdownWaitsOnAWebhookNoLongerThanItsGrace(_ store: ServerStore) async throws {
        let t = Harness.tokens(1, seed: 252)
        let production = try Self.mock(t)
        defer { production.stop() }
        let slow = WebhookReceiver(trickling: true)
        slow.up()
        defer { slow.stop() }
        let server = try await Self.server(store, production: production, urls: [slow.url], timeoutMillis: 120_000,
                                           concurrency: 2, extra: "shutdown_grace_seconds: 2")
        try await server.start()
        try await Self.failDeliveries(server, t)
        try await WebhookTests.wait("the send is in flight", timeout: 20) { slow.requests.count == 1 }
        let started = Date()
        let status = await server.stop(SIGTERM, timeout: 60)
        let took = Date().timeIntervalSince(started)
        #expect(status == 0)
        #expect(took < 10, "the shutdown took \(took) s with a grace of 2 s")
    }

    /// The whole URL, query token included, was listed by `GET /v1/webhook-events`
    /// and logged: now scheme, host, port and path only. The query is still sent.
    @Test(arguments: ServerStore.allCases)
    func aReceiversURLIsShownWithoutItsQuery(_ store: ServerStore) async throws {
        let t = Harness.tokens(1, seed: 253)
        let production = try Self.mock(t)
        defer { production.stop() }
        let receiver = WebhookReceiver(answers: [500])
        receiver.up()
        defer { receiver.stop() }
        let secretQuery = "token=query-secret-4f9a"
        let server = try await Self.server(store, production: production, urls: ["\(receiver.url)?\(secretQuery)"],
                                           timeoutMillis: 5_000, concurrency: 2, logLevel: "info")
        try await server.start()
        defer { Task { await server.stop() } }
        try await Self.failDeliveries(server, t)
        try await WebhookTests.wait("the event delivered after a 500", timeout: 20) {
            await Self.events(server, "delivered").count == 1
        }
        #expect(receiver.requests.count == 2)
        let listed = await server.backend("GET", "/v1/webhook-events?limit=100")
        #expect((listed.json["events"] as? [[String: Any]])?.first?["url"] as? String == receiver.url, "\(listed.body)")
        #expect(!listed.body.contains("query-secret"))
        #expect(server.stderr.contains("webhook attempt failed"), "the failed attempt is logged: \(server.stderr)")
        #expect(!server.stderr.contains("query-secret"), "\(server.stderr)")
    }
}

/// Where a webhook may go and how its URL may be written, checked at start and by
/// `--check-config`: one line and exit 2 for a refusal, a warning for plain http to
/// another machine. No secret is ever quoted.
@Suite struct WebhookDestinationConfigTests {
    @Test func refusedDestinationsAndCredentialsInTheURLExit2WithOneLine() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = """
            webhooks:
              endpoints:
              - url: https://127.0.0.1:9443/hooks/apns
                secret_file: webhook.secret
                events: [delivery.failed]
            """
        let server = ServerProcess(sandbox: nil, production: nil, options: options)
        chmod(server.scratch.file("webhook.secret", WebhookTests.secret + "\n"), 0o600)
        let base = "url: https://127.0.0.1:9443/hooks/apns"
        let good = await ConfigTests.run(["--check-config", "--config", server.configPath])
        #expect(good.status == 0 && !good.stderr.contains("plain http"), "loopback is allowed: \(good.stderr)")

        let cases: [(String, String)] = [
            ("url: https://hook-user:hook-pass-77@127.0.0.1:9443/hooks/apns?k=query-secret-4f9a",
             "config: webhooks.endpoints[0].url https://127.0.0.1:9443/hooks/apns has a user or password (user:pass@), which is not sent; receivers check the APNs-Server-Signature header instead"),
            ("url: http://169.254.169.254/latest/meta-data",
             "config: webhooks.endpoints[0].url http://169.254.169.254/latest/meta-data: 169.254.169.254 is link-local (169.254.0.0/16, the cloud metadata service's range): never a webhook receiver"),
            ("url: https://[fe80::1]/h", "config: webhooks.endpoints[0].url https://[fe80::1]/h: fe80::1 is link-local (fe80::/10): never a webhook receiver"),
            ("url: https://[::ffff:169.254.10.1]/h", "link-local (169.254.0.0/16"),
            ("url: https://[fd00:ec2::254]/h", "is a cloud metadata address: never a webhook receiver"),
            ("url: https://0.0.0.0/h", "0.0.0.0 is not a unicast address"),
            ("url: https://10.1.2.3/h",
             "config: webhooks.endpoints[0].url https://10.1.2.3/h: 10.1.2.3 is in a private range; set webhooks.allow_private_networks: true to send there"),
            ("url: https://192.168.1.20:8443/h", "192.168.1.20 is in a private range"),
            ("url: https://172.20.0.1/h", "172.20.0.1 is in a private range"),
            ("url: https://[fd12:3456::1]/h", "fd12:3456::1 is in a private range"),
        ]
        for (replacement, expected) in cases {
            let path = try ConfigTests.config(server, [(base, replacement)])
            for arguments in [["--config", path], ["--check-config", "--config", path]] {
                let r = await ConfigTests.run(arguments)
                #expect(r.status == 2, "\(replacement): \(r.status) \(r.stderr)")
                #expect(r.stderr.hasPrefix("apns-server: ") && r.stderr.contains(expected)
                        && r.stderr.split(separator: "\n").count == 1, "\(replacement): \(r.stderr)")
                #expect(!r.stderr.contains("hook-pass") && !r.stderr.contains("hook-user") && !r.stderr.contains("query-secret"),
                        "no secret quoted: \(r.stderr)")
            }
        }

        // A private range once the config allows it; never link-local.
        let allowed = try ConfigTests.config(server, [("webhooks:\n  endpoints:", "webhooks:\n  allow_private_networks: true\n  endpoints:"),
                                                      (base, "url: https://10.1.2.3/h")])
        let ok = await ConfigTests.run(["--check-config", "--config", allowed])
        #expect(ok.status == 0, "\(ok.stderr)")
        let still = try ConfigTests.config(server, [("webhooks:\n  endpoints:", "webhooks:\n  allow_private_networks: true\n  endpoints:"),
                                                    (base, "url: https://169.254.169.254/h")])
        #expect(await ConfigTests.run(["--check-config", "--config", still]).status == 2)

        // Plain http to another machine: allowed, with a warning at start and from --check-config.
        let plain = try ConfigTests.config(server, [(base, "url: http://203.0.113.7/hooks?k=query-secret-4f9a")])
        let warned = await ConfigTests.run(["--check-config", "--config", plain])
        #expect(warned.status == 0, "\(warned.stderr)")
        #expect(warned.stderr.contains("webhooks: http://203.0.113.7/hooks is plain http to another machine"), "\(warned.stderr)")
        #expect(!warned.stderr.contains("query-secret"))
        let local = try ConfigTests.config(server, [(base, "url: http://127.0.0.1:9/hooks")])
        let quiet = await ConfigTests.run(["--check-config", "--config", local])
        #expect(quiet.status == 0 && !quiet.stderr.contains("plain http"), "\(quiet.stderr)")
    }
}
