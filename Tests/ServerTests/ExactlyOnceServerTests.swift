import APNsMock
import Foundation
import Testing
import TestSupport

/// Idempotency keys and scheduled sends against the real binary, killed with
/// SIGKILL between tries, on SQLite (one process) and PostgreSQL (two processes
/// on one database, each sending to a mock of its own).
@Suite(.serialized) struct ExactlyOnceServerTests {
    static let notify = #"{"type":"order_status_changed","app_type":"staff","user_ids":["u1","u2"],"alert":{"title":"Ready","body":"Order 1"}}"#

    static func post(_ server: ServerProcess, _ body: String, key: String) async -> HTTPResponse {
        await server.request("POST", "/v1/notifications", body: body, bearer: Harness.apiKey,
                             headers: [("Idempotency-Key", key)])
    }

    /// The processes, their mocks, and a way to kill and restart one.
    final class Servers: @unchecked Sendable {
        let servers: [ServerProcess]
        let mocks: [MockServer]
        let scale: ScaleOut?

        init(_ store: ServerStore) async throws {
            if store == .postgres {
                let scale = try await ScaleOut(instances: 2)
                self.scale = scale
                servers = scale.servers
                mocks = scale.mocks
            } else {
                scale = nil
                mocks = [try Harness.mock(sandbox: false)]
                servers = [ServerProcess(sandbox: nil, production: mocks[0])]
            }
            for server in servers { try await server.start() }
        }

        func kill9(_ i: Int) async throws {
            await servers[i].stop(SIGKILL)
            try await servers[i].start()
        }

        /// Sends to `token`, over every instance's mock.
        func attempts(_ token: String) -> Int { mocks.reduce(0) { $0 + $1.attempts(for: token) } }

        func apnsIDs(_ token: String) -> [String] {
            mocks.flatMap { $0.recordedRequests() }.filter { $0.token == token }.compactMap { $0.header("apns-id") }
        }

        func titles(_ token: String) -> [String] {
            mocks.flatMap { $0.recordedRequests() }.filter { $0.token == token }.compactMap { request in
                let json = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
                return ((json?["aps"] as? [String: Any])?["alert"] as? [String: Any])?["title"] as? String
            }
        }

        /// When the mocks received the requests to `token` whose alert has this title,
        /// in Unix milliseconds.
        func received(_ token: String, title: String) -> [Int64] {
            mocks.flatMap { $0.recordedRequests() }.filter { $0.token == token }.compactMap { request in
                let json = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]
                let alert = (json?["aps"] as? [String: Any])?["alert"] as? [String: Any]
                return alert?["title"] as? String == title ? Instants.millis(received: request.received) : nil
            }
        }

        func stop() async {
            if let scale { await scale.stop() } else {
                for server in servers { await server.stop() }
                for mock in mocks { mock.stop() }
            }
        }
    }

    static func until(_ what: String, _ done: () async -> Bool) async throws {
        let end = Date().addingTimeInterval(180)
        while Date() < end {
            if await done() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("never happened: \(what)")
    }

    /// Five copies at once (spread over the instances), then five more one at a
    /// time with a SIGKILL before each: one notification, one send per device.
    @Test(arguments: ServerStore.allCases) func aPostRepeatedAcrossKillsSendsOnce(_ store: ServerStore) async throws {
        let s = try await Servers(store)
        do {
            let t = Harness.tokens(3, seed: 2321)
            await BackendAPITests.register(s.servers[0], user: "u1", token: t[0])
            await BackendAPITests.register(s.servers[0], user: "u1", token: t[1])
            await BackendAPITests.register(s.servers[0], user: "u2", token: t[2])

            let racing = await withTaskGroup(of: HTTPResponse.self) { group in
                for i in 0..<5 {
                    let server = s.servers[i % s.servers.count]
                    group.addTask { await Self.post(server, Self.notify, key: "retry-me") }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let first = racing[0]
            #expect(first.status == 202 && first.json["deliveries"] as? Int == 3, "\(first)")
            #expect(racing.allSatisfy { $0.status == 202 && $0.body == first.body }, "\(racing)")
            // Sent and recorded before the kills: a kill while APNs holds a send is the
            // outbox's own at-least-once window (`WorkerTests.killNineAndRestart`), not
            // what a key guards.
            try await s.servers[0].drained()
            for i in 0..<5 {
                let victim = i % s.servers.count
                try await s.kill9(victim)
                let again = await Self.post(s.servers[(i + 1) % s.servers.count], Self.notify, key: "retry-me")
                #expect(again.status == 202 && again.body == first.body, "after kill \(i): \(again)")
            }
            try await s.servers[0].drained()
            for token in t {
                #expect(s.attempts(token) == 1, "one send to \(token)")
                #expect(Set(s.apnsIDs(token)).count == 1, "one delivery to \(token)")
            }
            let id = try #require(first.json["notification_id"] as? String)
            let log = await s.servers[0].backend("GET", "/v1/notifications/\(id)")
            #expect((log.json["summary"] as? [String: Any])?["delivered"] as? Int == 3, "\(log)")
        } catch {
            for server in s.servers { print(server.stderr) }
            await s.stop()
            throw error
        }
        await s.stop()
    }

    /// Scheduled a few seconds ahead, then every instance killed (SIGKILL) before its
    /// time and started again: it goes once, not before its time and not long after;
    /// the cancelled one never; the replaced one only in its new form. A process is
    /// the point: the release binary, on the real time.
    @Test(arguments: ServerStore.allCases) func aScheduledNotificationSurvivesKillAndGoesOnce(_ store: ServerStore) async throws {
        let s = try await Servers(store)
        do {
            let token = Harness.tokens(1, seed: 2322)[0]
            await BackendAPITests.register(s.servers[0], user: "m", token: token)
            func body(_ title: String, _ extra: String) -> String {
                #"{"type":"order_status_changed","app_type":"staff","user_ids":["m"],"alert":{"title":"\#(title)","body":"b"}\#(extra)}"#
            }
            // Ahead by many times what four requests and the kills take beside the rest
            // of the suite; in whole milliseconds, as the API keeps it.
            let due = Instants.now + 6_000
            let at = #","send_at":"\#(Instants.iso(due))""#
            let keyed = at + #","schedule_key":"trip-9/event-4/reminder""#
            let last = s.servers.count - 1
            let old = await s.servers[0].backend("POST", "/v1/notifications", body("Old form", keyed))
            #expect(old.status == 202, "\(old)")
            let new = await s.servers[last].backend("POST", "/v1/notifications", body("New form", keyed))
            #expect(new.status == 202 && new.json["superseded"] as? String == old.json["notification_id"] as? String, "\(new)")
            let doomed = await s.servers[0].backend("POST", "/v1/notifications", body("Cancelled", at))
            let doomedID = try #require(doomed.json["notification_id"] as? String)
            #expect(await s.servers[last].backend("DELETE", "/v1/notifications/\(doomedID)").status == 200)

            // Every instance down at once: only the database holds the schedule.
            for server in s.servers { await server.stop(SIGKILL) }
            let killed = Instants.now
            #expect(killed < due, "killed at \(Instants.iso(killed)), before its time \(Instants.iso(due))")
            #expect(s.attempts(token) == 0)
            for server in s.servers { try await server.start() }
            let up = Instants.now

            // A probe sent now goes; the reminder goes at its time.
            #expect(await s.servers[0].backend("POST", "/v1/notifications", body("Probe", "")).status == 202)
            try await Self.until("the probe and the reminder") { s.titles(token).count == 2 }
            // (Each instance has its own mock: compared as sets, the order is the waits'.)
            #expect(s.titles(token).sorted() == ["New form", "Probe"])
            let sent = try #require(s.received(token, title: "New form").first)
            #expect(sent >= due - Instants.skew && sent <= max(due, up) + Instants.lateness,
                    "sent at \(Instants.iso(sent)), due at \(Instants.iso(due)), restarted by \(Instants.iso(up))")

            // Killed again after it went (and was recorded: a kill while APNs holds a
            // send is the outbox's at-least-once window): it does not go again.
            try await s.servers[0].drained()
            for i in s.servers.indices { try await s.kill9(i) }
            #expect(await s.servers[last].backend("POST", "/v1/notifications", body("Late probe", "")).status == 202)
            try await Self.until("the late probe") { s.titles(token).count == 3 }
            try await s.servers[0].drained()
            #expect(s.titles(token).sorted() == ["Late probe", "New form", "Probe"])
            #expect(Set(s.apnsIDs(token)).count == 3, "one delivery each: the schedule was fanned out once")
            #expect(await s.servers[0].backend("GET", "/v1/notifications/\(doomedID)").json["state"] as? String == "cancelled")
        } catch {
            for server in s.servers { print(server.stderr) }
            await s.stop()
            throw error
        }
        await s.stop()
    }
}
