import APNsMock
import Foundation
@testable import Store
import Testing
import TestSupport

/// Issue #11: several apns-server processes sharing one PostgreSQL, on a real
/// cluster, against the real mock. One test at a time: each runs three servers and
/// a database on a machine that is loaded already.
@Suite(.serialized) struct ScaleOutTests {
    /// Three instances, one of them SIGKILLed mid-run while it holds deliveries it
    /// sent and never had answers to (its APNs stops answering after its 100th
    /// request, so it holds them however late the test gets to the kill): the
    /// survivors send what it held once its lease has run out (with the same
    /// apns-ids), every delivery ends in exactly one final entry, and no apns-id goes
    /// out on two instances within a lease.
    @Test func threeInstancesSurviveOneKilled() async throws {
        // Most of the run is still to go when the victim stalls; the soak's size
        // under `make soak`.
        let count = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1" ? 20_000 : 5_000
        let lease = 10
        let victim = 1
        let answered = 100
        var options = ServerProcess.Options()
        options.leaseSeconds = lease
        // Small claims, so that the work spreads over the three and each holds some
        // when one dies.
        options.batchSize = 200
        let statuses = try await ScaleOut.run(instances: 3, options: options, mock: { instance, mock in
            mock.latency = .milliseconds(20)
            if instance == victim { mock.stallAfter = answered }
        }) { scale in
            _ = try await scale.seed(count, seed: 1100)
            let id = try await scale.notifyCompany(through: scale.servers[0])
            try await scale.wait("the victim holding sends never answered") {
                scale.mocks[victim].recordedRequests().count > answered
            }
            await scale.servers[victim].stop(SIGKILL)
            let killedAt = ScaleOut.monotonicNow()
            let depthAtKill = try await scale.store.outboxDepth()
            #expect(depthAtKill > 0, "killed holding deliveries")
            try await scale.drained()

            let (log, counts) = try await scale.log(id)
            #expect(counts == ["delivered": count], "every delivery delivered: \(counts)")
            #expect(log.count == count)
            #expect(log.allSatisfy { $0.state == "delivered" && $0.status == 200 })
            let logged = Set(log.map { $0.apnsID.lowercased() })
            #expect(logged.count == count, "one log entry per apns-id")

            let sends = scale.sends()
            let sent = sends.reduce(into: Set<String>()) { $0.formUnion($1.keys) }
            #expect(sent == logged, "every logged apns-id went out, and nothing else did")
            for i in sends.indices where i != victim { #expect(!sends[i].isEmpty, "instance \(i) took part") }
            // An apns-id on two instances went out again only after the first one's
            // lease: at least the lease less one renewal interval (a third of it) after
            // the first send; half a lease, for a loaded machine. (Between survivors:
            // a lease a live instance lost, its renewals held up by the load.)
            for i in sends.indices {
                for j in sends.indices where j > i {
                    for (apnsID, first) in sends[i] {
                        guard let second = sends[j][apnsID] else { continue }
                        let gap = first.flatMap { a in second.map { b in a > b ? a - b : b - a } }.min()!
                        #expect(gap >= .seconds(lease) / 2,
                                "\(apnsID) went out on instances \(i) and \(j) \(gap) apart, within a lease")
                    }
                }
            }
            // What the victim had sent but not recorded went out again on a survivor,
            // after the kill.
            // (A survivor's lease can lapse under load, so both survivors may send one.)
            var resent = Set<String>()
            for (apnsID, _) in sends[victim] {
                for i in sends.indices where i != victim {
                    guard let later = sends[i][apnsID] else { continue }
                    resent.insert(apnsID)
                    #expect(later.max()! > killedAt, "\(apnsID): a survivor sent it again only after the kill")
                }
            }
            #expect(!resent.isEmpty, "the victim held sent-but-unrecorded deliveries, finished by the survivors")
            let unanswered = Set(scale.mocks[victim].recordedRequests().filter { $0.status == 0 }
                .compactMap { $0.header("apns-id")?.lowercased() })
            let survivors = sends.indices.filter { $0 != victim }.reduce(into: Set<String>()) { $0.formUnion(sends[$1].keys) }
            #expect(!unanswered.isEmpty && unanswered.isSubset(of: survivors),
                    "every send the victim never had an answer to went out again on a survivor")
        }
        #expect(statuses == [0, 0], "the survivors drained and exited 0 on SIGTERM")
    }

    /// Two instances started at once on an empty database: both migrate (one waits
    /// for the other's lock), both serve, the schema is there once.
    @Test func twoInstancesMigrateAnEmptyDatabaseAtOnce() async throws {
        for round in 0..<2 {
            let statuses = try await ScaleOut.run(instances: 2) { scale in
                let version = try await scale.store.scalar("SELECT count(*) FROM schema_migrations")
                #expect(version == Int64(PostgresMigrations.steps.count), "round \(round): each step applied once")
                let tokens = try await scale.seed(10, seed: 1200 + round)
                let id = try await scale.notifyCompany(through: scale.servers[1])
                try await scale.drained()
                let (log, counts) = try await scale.log(id)
                #expect(counts == ["delivered": tokens.count], "round \(round): \(counts)")
                #expect(Set(log.map(\.token)) == Set(tokens))
            }
            #expect(statuses == [0, 0], "round \(round): both exit 0 on SIGTERM, the store closed")
        }
    }

    /// The database stops and starts mid-run: the instances reconnect (pool and
    /// LISTEN), deliveries whose outcome could not be written go out again with
    /// their apns-ids once their lease runs out, and nothing is lost.
    @Test func databaseRestartsMidRun() async throws {
        let count = 6000
        var options = ServerProcess.Options()
        options.leaseSeconds = 5
        options.batchSize = 200
        // A cluster of its own: the restart would cut every other test's connections.
        let statuses = try await ScaleOut.run(instances: 2, options: options, ownCluster: true,
                                              mock: { $1.latency = .milliseconds(20) }) { scale in
            _ = try await scale.seed(count, seed: 1300)
            let id = try await scale.notifyCompany(through: scale.servers[0])
            try await scale.wait("1,000 sends before the restart") { scale.requestsReceived >= 1000 }
            let cluster = scale.cluster
            try await cluster.restartOffPool()
            try await scale.drained()

            let (log, counts) = try await scale.log(id)
            #expect(counts == ["delivered": count], "nothing lost: \(counts)")
            let logged = Set(log.map { $0.apnsID.lowercased() })
            #expect(logged.count == count)
            let sent = scale.sends().reduce(into: Set<String>()) { $0.formUnion($1.keys) }
            #expect(sent == logged, "every resend carried its delivery's apns-id")
            for (i, server) in scale.servers.enumerated() {
                #expect(server.isRunning, "instance \(i) rode out the restart")
                // Its pool is back: a request that reads the database answers.
                let r = await server.backend("GET", "/v1/notifications/\(id)?limit=1")
                #expect(r.status == 200, "instance \(i) after the restart: \(r.status) \(r.body)")
            }
            // And its LISTEN is back: a new notification, enqueued through one, is sent.
            let more = try await scale.notifyCompany(through: scale.servers[1])
            try await scale.drained()
            #expect(try await scale.log(more).counts == ["delivered": count])
        }
        #expect(statuses == [0, 0])
    }

    /// An idle worker wakes on work another instance enqueued (LISTEN/NOTIFY), long
    /// before its poll (set to a minute here) would have found it.
    @Test func idleWorkerWakesOnAnotherInstancesEnqueue() async throws {
        var options = ServerProcess.Options()
        options.pollMillis = 60_000
        try await ScaleOut.run(instances: 1, options: options) { scale in
            let token = try await scale.seed(1, seed: 1400)[0]
            let device = try #require(try await scale.store.recipients(appType: "staff", audience: .company(ScaleOut.company))
                .first?.devices.first)
            // The "other instance" is the test's own store: its enqueue notifies.
            for round in 1...3 {
                let apnsID = UUID().uuidString.lowercased()
                try await scale.store.enqueue(
                    NewNotification(id: "idle-\(round)", type: "order_created", entityType: "order", entityID: "o",
                                    appType: "staff"),
                    [NewDelivery(userID: "u1400-0", deviceID: device.id, token: token, environment: "production",
                                 apnsID: apnsID, payload: Array(#"{"aps":{"alert":"round \#(round)"},"type":"order_created"}"#.utf8))],
                    now: Int64(Date().timeIntervalSince1970 * 1000))
                try await scale.wait("round \(round) sent, before the one-minute poll", timeout: 45) {
                    scale.mocks[0].attempts(for: token) >= round
                }
                try await scale.drained(timeout: 45)
                #expect(try await scale.store.delivery(apnsID: apnsID)?.state == "delivered")
            }
        }
    }

    /// A database that is not there at start: one line naming it, exit 2.
    @Test func unreachableDatabaseStopsTheStart() async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        var options = ServerProcess.Options()
        options.database = "postgres://apns:s3cret@127.0.0.1:\(closed.port)/apns?sslmode=disable"
        let server = ServerProcess(sandbox: nil, production: nil, options: options)
        let r = await ConfigTests.run(["--config", server.configPath])
        #expect(r.status == 2, "\(r.status) \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
        #expect(r.stderr.hasPrefix("apns-server: database postgres://apns@127.0.0.1:\(closed.port)/apns"), "\(r.stderr)")
        #expect(r.stderr.contains("cannot reach PostgreSQL at 127.0.0.1:\(closed.port)"), "\(r.stderr)")
        #expect(!r.stderr.contains("s3cret"), "never the password")
    }
}
