import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Store

/// The PostgreSQL store's mechanics, on a real server: one cluster for the suite, a
/// new database per test. Several instances racing (SKIP LOCKED, advisory locks),
/// wake-ups, the pool, restarts, the URL. Every behaviour both stores share is one
/// body run on both (`StoreKind`: OutboxTests, RegistryTests, UpgradeTests and the
/// like); ConcurrencyTests is SQLite's side of the mechanics.
@Suite(.postgresCluster) struct PostgresStoreTests {
    // MARK: Outbox

    // MARK: Several instances

    @Test func workersOnSeveralInstancesClaimingAtOnceNeverHoldTheSameDelivery() async throws {
        try await withPostgres(instances: 4) { stores in
            for n in 0..<5 { try await enqueueMany(stores[0], "n\(n)", count: 1_000) }

            // Twelve workers, three per instance, claim in small batches (leases outlive
            // the test) until nothing is free; every second batch is finished at once,
            // so claims interleave with deletes. Each waits after its first batch until
            // all have one, so that they all race.
            let started = ClaimersStarted()
            let claims = try await withThrowingTaskGroup(of: (worker: Int, ids: [Int64]).self) { group in
                for worker in 0..<12 {
                    let store = stores[worker % stores.count]
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let batch = try await store.claim(worker: "w\(worker)", limit: 37,
                                                              leaseMillis: 3_600_000, now: 10)
                            if batch.isEmpty { return (worker, mine) }
                            if mine.isEmpty {
                                started.count.withLock { $0 += 1 }
                                while started.count.withLock({ $0 }) < 12 { try await Task.sleep(for: .milliseconds(1)) }
                            }
                            mine += batch.map(\.id)
                            if mine.count % 2 == 0 {
                                #expect(try await store.finish(worker: "w\(worker)", batch.map { delivered($0.id) },
                                                               now: 11) == 0)
                            }
                        }
                    }
                }
                var all = Array(repeating: [Int64](), count: 12)
                for try await (worker, ids) in group { all[worker] = ids }
                return all
            }
            let all = claims.flatMap { $0 }
            #expect(all.count == 5_000)
            #expect(Set(all).count == 5_000)
            // Every instance took part, or the test proves nothing.
            for instance in 0..<stores.count {
                #expect(claims.indices.filter { $0 % stores.count == instance }.map { claims[$0].count }.reduce(0, +) > 0)
            }
            #expect(try await stores[0].scalar("""
                SELECT count(*) FROM deliveries d
                WHERE d.state = 'pending' AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
                """)
                    == stores[0].scalar("SELECT count(*) FROM outbox"))
            #expect(try await stores[0].scalar("SELECT count(*) FROM outbox WHERE claimed_by IS NULL") == 0)
        }
    }

    @Test func migratingTwiceAndFromSeveralInstancesAtOnceIsHarmless() async throws {
        for _ in 0..<3 {
            let url = try await suiteCluster().newDatabase()
            let stores = try (0..<4).map { _ in try PostgresStore(url: url) }
            // Instances starting at once on an empty database.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for store in stores { group.addTask { try await store.migrate() } }
                try await group.waitForAll()
            }
            try await stores[0].migrate()
            #expect(try await stores[0].scalar("SELECT count(*) FROM schema_migrations")
                    == Int64(PostgresMigrations.steps.count))
            #expect(try await stores[0].scalar("SELECT max(version) FROM schema_migrations")
                    == Int64(PostgresMigrations.steps.count))
            #expect(try await stores[0].scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'outbox'") == 1)

            // Migrating keeps what is there.
            try await register(stores[1], "u1", 1)
            try await stores[2].migrate()
            #expect(try await stores[3].devices(userID: "u1").count == 1)
            for store in stores { await store.close() }
        }
    }

    @Test func anIdleWorkerWakesWhenAnotherInstanceEnqueues() async throws {
        try await withPostgres(instances: 2) { stores in
            let (worker, api) = (stores[0], stores[1])
            // The first wait opens the LISTEN connection; a (re)connect is itself a wake.
            _ = await worker.waitForWork(timeout: .milliseconds(1))
            while worker.wakeups.listenCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
            while await worker.waitForWork(timeout: .milliseconds(1)) {}

            // A wait that only a notification can end (the timeout is ten minutes).
            async let woken = worker.waitForWork(timeout: .seconds(600))
            try await enqueueMany(api, "n", count: 1)
            #expect(await woken)
            #expect(try await worker.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 1).count == 1)
            #expect(await worker.waitForWork(timeout: .milliseconds(1)) == false)
        }
    }

    // MARK: The claim's index, and windows across instances

    /// The rows a worker holds are not in the claim's index: a claim behind 2,000
    /// held rows reads the 100 it takes and no more (EXPLAIN ANALYZE counts the rows
    /// each step read, a state, not a time).
    @Test func theClaimWalksOnlyFreeDueRowsOfItsPartialIndex() async throws {
        try await withPostgres { store in
            try await enqueueMany(store, "n", count: 5_000)
            #expect(try await store.claim(worker: "busy", limit: 2_000, leaseMillis: 600_000, now: 2).count == 2_000)
            try await store.execute("ANALYZE")
            let plan = try await store.texts("""
                EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) \(PostgresStore.claimSQL
                    .replacingOccurrences(of: "$1", with: "2").replacingOccurrences(of: "$2", with: "100")
                    .replacingOccurrences(of: "$3", with: "600000").replacingOccurrences(of: "$4", with: "'explain'"))
                """).compactMap { $0.first ?? nil }
            let text = plan.joined(separator: "\n")
            let free = try #require(plan.first { $0.contains("Index Scan using outbox_free on outbox") }, "\(text)")
            #expect(free.contains("actual rows=100 "), "\(text)")
            #expect(!text.contains("Seq Scan on outbox"), "\(text)")
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by = 'explain'") == 100)
            #expect(try await store.scalar("SELECT min(delivery_id) FROM outbox WHERE claimed_by = 'explain'")
                    == store.scalar("SELECT min(id) FROM deliveries") .map { $0 + 2_000 }, "the oldest free ones")
        }
    }

    /// Enqueues on four instances at once for one device's window, while workers
    /// claim its carrier: every member ends carried by exactly one carrier, and each
    /// carrier went out with the members it had when it was claimed (none joined a
    /// carrier already taken, whose payload was on its way).
    @Test func enqueuesOnSeveralInstancesJoinOneWindowAndNeverATakenOne() async throws {
        try await withPostgres(instances: 4) { stores in
            let members = 200
            func member(_ i: Int) -> NewDelivery {
                // Due at once (the carrier may be claimed any time), the window open for long.
                NewDelivery(userID: "u1", deviceID: 1, token: token(1), environment: "production", apnsID: "m\(i)",
                            payload: Array(#"{"aps":{"alert":"\#(i)"}}"#.utf8), notBefore: 1,
                            hold: Hold(kind: .coalesce(carrierAPNsID: "c\(i)", carrierCollapseID: "job"), key: "job",
                                       closesAt: 1_000_000))
            }
            let claimedBatches = try await withThrowingTaskGroup(of: [ClaimedDelivery].self) { group in
                for instance in 0..<4 {
                    group.addTask {
                        for i in stride(from: instance, to: members, by: 4) {
                            try await stores[instance].enqueue(
                                NewNotification(id: "n\(i)", type: "t", entityType: nil, entityID: nil, appType: "staff"),
                                [member(i)], now: 1)
                        }
                        return []
                    }
                }
                // Two workers claim while the enqueues run, and until nothing is left.
                let enqueued: @Sendable () async throws -> Int64 = {
                    try await stores[0].scalar("SELECT count(*) FROM deliveries WHERE apns_id LIKE 'm%'") ?? 0
                }
                for worker in 0..<2 {
                    group.addTask {
                        var mine: [ClaimedDelivery] = []
                        while true {
                            let done = try await enqueued() == Int64(members)
                            let batch = try await stores[worker].claim(worker: "w\(worker)", limit: 10,
                                                                        leaseMillis: 600_000, now: 2)
                            mine += batch
                            if done && batch.isEmpty { return mine }
                        }
                    }
                }
                var all: [ClaimedDelivery] = []
                for try await batch in group { all += batch }
                return all
            }
            let store = stores[0]
            #expect(try await store.scalar("SELECT count(*) FROM outbox WHERE claimed_by IS NULL") == 0, "all claimed")
            #expect(try await store.outboxDepth() == claimedBatches.count)
            var carried = 0
            for carrier in claimedBatches {
                let view = try #require(try await store.delivery(apnsID: carrier.delivery.apnsID))
                let joined = try await store.scalar("""
                    SELECT count(*) FROM deliveries m JOIN deliveries c ON c.id = m.carried_by
                    WHERE c.apns_id = '\(carrier.delivery.apnsID)' AND m.state = 'batched'
                    """)
                #expect(joined == Int64(carrier.batched), "\(carrier.delivery.apnsID) went out with all its members")
                #expect(view.batched == carrier.batched, "and none joined it since")
                carried += carrier.batched
            }
            #expect(carried == members)
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE apns_id LIKE 'm%' AND state = 'batched'")
                    == Int64(members))
        }
    }

    /// Instances storing one key's channel at once all get the one that won; broadcasts
    /// claimed by workers on four instances at once are never held by two.
    @Test func channelsAndBroadcastsAcrossInstances() async throws {
        try await withPostgres(instances: 4) { stores in
            let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
            let stored = try await withThrowingTaskGroup(of: ChannelRow.self) { group in
                for (i, store) in stores.enumerated() {
                    group.addTask {
                        try await store.addChannel(ChannelRow(key: key, channelID: "ch\(i)", storagePolicy: 1, createdAt: 1),
                                                 audience: nil)
                    }
                }
                var all: [ChannelRow] = []
                for try await row in group { all.append(row) }
                return all
            }
            #expect(Set(stored).count == 1, "\(stored)")
            let channel = try #require(stored.first)
            #expect(try await stores[0].channel(key) == channel)

            for i in 0..<400 {
                try await stores[i % 4].enqueueBroadcast(NewBroadcast(id: "b\(i)", channel: channel, payload: Array("{}".utf8),
                                                                      priority: 10, expiration: 0), now: 1)
            }
            let claimed = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let batch = try await stores[worker % 4].claimBroadcasts(worker: "w\(worker)", limit: 7,
                                                                                      leaseMillis: 600_000, now: 2)
                            if batch.isEmpty { return mine }
                            #expect(batch.allSatisfy { $0.broadcast.channel.storagePolicy == 1 && $0.attempts == 0 })
                            mine += batch.map(\.broadcast.id)
                        }
                    }
                }
                var all: [String] = []
                for try await ids in group { all += ids }
                return all
            }
            #expect(claimed.count == 400 && Set(claimed).count == 400)
            #expect(try await stores[0].pendingBroadcasts() == 400, "claimed, not final")
        }
    }

    /// `close()` ends the pool's connections and the LISTEN one (the server sees them
    /// go), wakes a waiting worker, and later calls fail with one line.
    @Test func closeEndsThePoolAndTheListenConnection() async throws {
        let url = try await suiteCluster().newDatabase()
        let store = try PostgresStore(url: url)
        let observer = try PostgresStore(url: url)
        do {
            try await store.migrate()
            try await enqueueMany(store, "n", count: 1)
            _ = await store.waitForWork(timeout: .milliseconds(1))
            while store.wakeups.listenCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
            while await store.waitForWork(timeout: .milliseconds(1)) {}
            let others = """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
                """
            #expect(try await observer.scalar(others) ?? 0 >= 2, "the pool's connection and the LISTEN one")

            // A worker waiting for work (ten minutes) returns when the store closes.
            async let waiting = store.waitForWork(timeout: .seconds(600))
            while store.wakeups.waiterCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
            await store.close()
            #expect(await waiting == false)
            // Later waits are timers only, ended by their task's cancellation.
            let later = Task { await store.waitForWork(timeout: .seconds(600)) }
            later.cancel()
            #expect(await later.value == false)
            // The server sees every connection go (a state that lasts; a minute at most).
            var left = try await observer.scalar(others)
            for _ in 0..<600 where left != 0 {
                try await Task.sleep(for: .milliseconds(100))
                left = try await observer.scalar(others)
            }
            #expect(left == 0)
            let error = await #expect(throws: StoreError.self) { try await store.outboxDepth() }
            #expect(error?.description == "count the outbox: the store is closed")
            await observer.close()
        } catch {
            await store.close()
            await observer.close()
            throw error
        }
    }

    // MARK: Configuration and errors

    @Test func theURLIsReadAndThePasswordIsNeverShown() throws {
        let full = try PostgresStore.Configuration(url: "postgres://apns:s%40cret:x@db.example:6543/push?sslmode=require")
        #expect(full.user == "apns" && full.password == "s@cret:x" && full.host == "db.example" && full.port == 6543)
        #expect(full.database == "push" && full.tls == .require)
        #expect(full.description == "apns@db.example:6543/push")
        let plain = try PostgresStore.Configuration(url: "postgresql://apns@127.0.0.1/push")
        #expect(plain.port == 5432 && plain.password == nil && plain.tls == .require && plain.caFile == nil)
        let pinned = try PostgresStore.Configuration(url: "postgres://apns@db/push?sslmode=verify-full&sslrootcert=/etc/ca%20one.pem")
        #expect(pinned.tls == .verifyFull && pinned.caFile == "/etc/ca one.pem")
        #expect(plain.connectTimeout == .seconds(10))
        let patient = try PostgresStore.Configuration(url: "postgres://apns@db/push?connect_timeout=45&sslmode=disable")
        #expect(patient.connectTimeout == .seconds(45) && patient.tls == .disable)

        func problem(_ url: String) -> String? {
            do { _ = try PostgresStore.Configuration(url: url); return nil } catch { return error.description }
        }
        let shape = "expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
        #expect(problem("mysql://a@b/c") == "database URL: \(shape)")
        #expect(problem("postgres://b:5432/c") == "database URL: no user (\(shape))")
        #expect(problem("postgres://a:hunter2@b:5432") == "database URL: no database name (\(shape))")
        #expect(problem("postgres://a:hunter2@b:54x/c") == #"database URL: bad port "54x""#)
        #expect(problem("postgres://a:hunter2@:5432/c") == "database URL: no host (\(shape))")
        #expect(problem("postgres://a:hunter2@b/c?sslmode=maybe")
                == #"database URL: sslmode must be one of disable, require, verify-ca, verify-full, not "maybe""#)
        #expect(problem("postgres://a:hunter2@b/c?sslmode=prefer")?.hasPrefix("database URL: sslmode must be one of") == true,
                "prefer falls back to plain text on its own: not offered")
        #expect(problem("postgres://a@b/c?sslmode=disable&sslrootcert=/ca.pem")
                == "database URL: sslrootcert is for TLS, and sslmode=disable turns it off")
        for name in ["sslmode", "sslrootcert", "connect_timeout"] {
            #expect(problem("postgres://a@b/c?\(name)=") == "database URL: \(name) needs a value")
        }
        for bad in ["0", "-5", "2.5", "10s", "3601"] {
            #expect(problem("postgres://a@b/c?connect_timeout=\(bad)")
                    == "database URL: connect_timeout must be whole seconds from 1 to 3600, not \"\(bad)\"")
        }
        #expect(problem("postgres://a@b/c?connect=5")
                == #"database URL: unknown parameter "connect" (only sslmode, sslrootcert and connect_timeout are read)"#)
        for url in ["postgres://a:hunter2@b:54x/c", "postgres://a:hunter2@b:5432", "postgres://a:hunter2@b/c?x=1"] {
            #expect(problem(url)?.contains("hunter2") == false)
        }
    }

    @Test func anUnreachableDatabaseIsOneLineNamingHostAndPort() async throws {
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let store = try PostgresStore(url: "postgres://apns:hunter2@127.0.0.1:\(closed.port)/push?sslmode=disable")
        let error = await #expect(throws: StoreError.self) { try await store.migrate() }
        #expect(error?.description == "migrate: cannot reach PostgreSQL at 127.0.0.1:\(closed.port): connection refused")
        await store.close()

        // A server that is there, and a database that is not.
        let cluster = try suiteCluster()
        let missing = try PostgresStore(url: cluster.url(database: "nope"))
        let refused = await #expect(throws: StoreError.self) { try await missing.migrate() }
        #expect(refused?.description == #"migrate: PostgreSQL at 127.0.0.1:\#(cluster.port): database "nope" does not exist"#)
        await missing.close()
    }

    /// A host that takes the TCP connection and never answers (a wedged server, a
    /// firewall that drops what follows) ends the wait at `connect_timeout`, in one
    /// line, rather than holding the service's start for ever.
    @Test func aServerThatNeverAnswersIsATimeoutAtTheURLsConnectTimeout() async throws {
        let silent = SilentPort()
        defer { withExtendedLifetime(silent) {} }
        let store = try PostgresStore(url: "postgres://apns@127.0.0.1:\(silent.port)/push?sslmode=disable&connect_timeout=1")
        let error = await #expect(throws: StoreError.self) { try await store.migrate() }
        #expect(error?.description
                == "migrate: cannot reach PostgreSQL at 127.0.0.1:\(silent.port): no answer to the connection (timed out)")
        #expect(error?.isTemporary == true)
        await store.close()
    }
}

/// A cluster of its own: restarting it would disturb the suite's other tests.
@Suite struct PostgresRestartTests {
    @Test func aStoreWorksAgainAfterTheDatabaseRestartsAndNothingCommittedIsLost() async throws {
        let cluster = try await PostgresCluster.make()
        defer { cluster.stop() }
        let store = try PostgresStore(url: try await cluster.newDatabase())
        try await store.migrate()
        try await enqueueMany(store, "n", count: 10)
        let claimed = try await store.claim(worker: "w", limit: 4, leaseMillis: 60_000, now: 2)
        #expect(claimed.count == 4)
        // An idle worker's LISTEN connection, open before the restart.
        _ = await store.waitForWork(timeout: .milliseconds(1))
        while store.wakeups.listenCount == 0 { try await Task.sleep(for: .milliseconds(10)) }

        try await cluster.restartOffPool()
        // The pool's connections died with the server; a call may meet one before the
        // pool notices. The state that lasts: calls succeed again.
        var depth: Int?
        for _ in 0..<600 where depth == nil {     // a minute: a hang guard for a loaded machine
            depth = try? await store.outboxDepth()
            if depth == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(depth == 10)
        #expect(try await store.finish(worker: "w", claimed.map { delivered($0.id) }, now: 3) == 0)
        #expect(try await store.claim(worker: "v", limit: 10, leaseMillis: 60_000, now: 3).count == 6)

        // The LISTEN connection came back by itself, and wakes the worker again.
        while store.wakeups.listenCount < 2 {
            _ = await store.waitForWork(timeout: .milliseconds(10))
        }
        while await store.waitForWork(timeout: .milliseconds(1)) {}
        async let woken = store.waitForWork(timeout: .seconds(600))
        try await enqueueMany(store, "after", count: 1, now: 4)
        #expect(await woken)
        await store.close()
    }
}

/// How many claimers have their first batch.
private final class ClaimersStarted: Sendable {
    let count = Mutex(0)
}
