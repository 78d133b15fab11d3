import APNsMock
import Foundation
import Logging
import Testing
import TestSupport
@testable import Service
@testable import ServiceCore
@testable import ServiceWorkers
@testable import Store

/// The application in process on `store` with `clock`, as `withServer` runs it.
func withClockedServer<T>(_ store: ServerStore, production: MockServer?, clock: FakeClock,
                          options: ServerProcess.Options = ServerProcess.Options(),
                          prepare: (ServerProcess) throws -> Void = { _ in },
                          _ body: (InProcessServer) async throws -> T) async throws -> T {
    var options = options
    if store == .postgres {
        options.database = try await ServerPostgresTrait.newDatabase()
    }
    let server = InProcessServer(sandbox: nil, production: production, options: options, clock: clock)
    try prepare(server.files)
    try await server.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// `Idempotency-Key` on the backend's POSTs, in process on both stores: a request
/// sent again gets the first answer and sends nothing new, whether the copies come
/// one after another or all at once; another body with the key is a 422; another
/// API key has keys of its own; a key past retention is new again.
@Suite(.serverPostgres) struct IdempotencyServerTests {
    static let secondAPIKey = "second-backend-api-key-0123456789"
    static let notify = #"{"type":"order_status_changed","app_type":"staff","user_ids":["u1","u2"],"alert":{"title":"Ready","body":"Order 1"}}"#

    static func post(_ server: any APIServer, _ path: String, _ body: String, key: String?,
                     apiKey: String = Harness.apiKey) async -> HTTPResponse {
        await server.request("POST", path, body: body, bearer: apiKey,
                             headers: key.map { [("Idempotency-Key", $0)] } ?? [])
    }

    @Test(arguments: ServerStore.allCases) func aRepeatedPostMakesOneNotification(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        try await withClockedServer(store, production: production, clock: clock, prepare: { files in
            // A second backend, with a key of its own.
            let path = files.scratch.path("api-keys")
            let keys = try String(contentsOfFile: path, encoding: .utf8)
            try (keys + Self.secondAPIKey + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }) { server in
            let t = Harness.tokens(3, seed: 2301)
            await BackendAPITests.register(server, user: "u1", token: t[0])
            await BackendAPITests.register(server, user: "u1", token: t[1])
            await BackendAPITests.register(server, user: "u2", token: t[2])

            // One after another.
            let first = await Self.post(server, "/v1/notifications", Self.notify, key: "order-1/ready")
            #expect(first.status == 202, "\(first)")
            #expect(first.json["deliveries"] as? Int == 3)
            for _ in 0..<4 {
                let again = await Self.post(server, "/v1/notifications", Self.notify, key: "order-1/ready")
                #expect(again.status == 202 && again.body == first.body, "\(again)")
                #expect(again.headers.contains { $0.0.lowercased() == "idempotent-replayed" && $0.1 == "true" })
            }
            // All at once, another key.
            let racing = await withTaskGroup(of: HTTPResponse.self) { group in
                for _ in 0..<5 {
                    group.addTask { await Self.post(server, "/v1/notifications", Self.notify, key: "order-2/ready") }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(racing.allSatisfy { $0.status == 202 && $0.body == racing[0].body }, "\(racing)")
            #expect(racing[0].body != first.body)

            // The same key with another body, or on another route: 422, nothing stored.
            let changed = await Self.post(server, "/v1/notifications",
                                          Self.notify.replacingOccurrences(of: "Order 1", with: "Order 9"), key: "order-1/ready")
            #expect(changed.status == 422, "\(changed)")
            #expect(changed.body.hasPrefix(#"{"success":false,"error":"Idempotency-Key was already used for a different request"#))
            // Over 255 bytes: 400, nothing stored.
            let long = await Self.post(server, "/v1/notifications", Self.notify, key: String(repeating: "k", count: 256))
            #expect(long.status == 400 && long.body == #"{"success":false,"error":"Idempotency-Key must be 1 to 255 bytes"}"#,
                    "\(long)")
            let longest = await Self.post(server, "/v1/notifications", Self.notify, key: String(repeating: "k", count: 255))
            #expect(longest.status == 202, "255 bytes is a key")

            // Another backend's key of the same name is its own.
            let other = await Self.post(server, "/v1/notifications", Self.notify, key: "order-1/ready", apiKey: Self.secondAPIKey)
            #expect(other.status == 202 && other.json["notification_id"] as? String != first.json["notification_id"] as? String,
                    "\(other)")
            #expect(!other.headers.contains { $0.0.lowercased() == "idempotent-replayed" })

            try await server.drained()
            // order-1, order-2, the 255-byte key, the second backend: one send each per device.
            for token in t { #expect(production.attempts(for: token) == 4, "\(token)") }

            // Past idempotency.retention_hours (24) the key is new again.
            clock.advance(seconds: 24 * 3600 + 1)
            let later = await Self.post(server, "/v1/notifications", Self.notify, key: "order-1/ready")
            #expect(later.status == 202 && later.json["notification_id"] as? String != first.json["notification_id"] as? String)
            #expect(!later.headers.contains { $0.0.lowercased() == "idempotent-replayed" })
        }
    }

    /// Every POST that creates work takes the header: bulk registration and Live
    /// Activities answer again as they first did.
    @Test(arguments: ServerStore.allCases) func everyCreatingPostTakesTheKey(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        try await withClockedServer(store, production: production, clock: FakeClock(at: "2026-06-01T12:00:00Z")) { server in
            let t = Harness.tokens(2, seed: 2302)
            let bulk = #"{"devices":[{"user_id":"b1","deviceToken":"\#(t[0])","platform":"ios","appType":"staff","environment":"production"}]}"#
            let registered = await Self.post(server, "/v1/device-tokens", bulk, key: "bulk-1")
            #expect(registered.status == 200, "\(registered)")
            let again = await Self.post(server, "/v1/device-tokens", bulk, key: "bulk-1")
            #expect(again.status == 200 && again.body == registered.body)
            #expect(again.headers.contains { $0.0.lowercased() == "idempotent-replayed" })
            let badKey = await Self.post(server, "/v1/device-tokens", bulk, key: String(repeating: "x", count: 300))
            #expect(badKey.status == 400)

            let la = #"{"app_type":"staff","event":"update","user_ids":["b1"],"content_state":{"eta":5}}"#
            let sent = await Self.post(server, "/v1/live-activities", la, key: "la-1")
            #expect(sent.status == 202, "\(sent)")
            let resent = await Self.post(server, "/v1/live-activities", la, key: "la-1")
            #expect(resent.status == 202 && resent.body == sent.body)
            // A key names one request: the same key on another route is a conflict.
            let crossed = await Self.post(server, "/v1/notifications", Self.notify, key: "la-1")
            #expect(crossed.status == 422, "\(crossed)")
        }
    }

    /// The retention pruner removes keys past `idempotency.retention_hours`.
    @Test(arguments: ServerStore.allCases) func thePrunerRemovesExpiredKeys(_ store: ServerStore) async throws {
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        try await withClockedServer(store, production: nil, clock: clock) { server in
            let bulk = #"{"devices":[{"user_id":"p1","deviceToken":"\#(Harness.tokens(1, seed: 2303)[0])","platform":"ios","appType":"staff","environment":"production"}]}"#
            #expect(await Self.post(server, "/v1/device-tokens", bulk, key: "old").status == 200)
            clock.advance(seconds: 20 * 3600)
            #expect(await Self.post(server, "/v1/device-tokens", bulk, key: "new").status == 200)
            clock.advance(seconds: 5 * 3600)

            let config = try ServerConfig.load(path: server.configPath, environment: [:])
            let opened = try APNsServer.openStore(config.database)
            defer { Task { await APNsServer.closeStore(opened) } }
            let pruner = LogPruner(retention: config.retention, idempotencyRetentionHours: config.idempotencyRetentionHours,
                                   store: opened, clock: clock,
                                   metrics: ServiceMetrics(registry: Dependencies().metrics, config: config),
                                   logger: .init(label: "test"))
            #expect(await pruner.pruneIdempotencyKeys() == 1, "the 25-hour-old key only")
            #expect(await pruner.pruneIdempotencyKeys() == 0)
        }
    }
}
