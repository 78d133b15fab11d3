import Foundation
import Testing
import TestSupport
@testable import Store

/// The PostgreSQL store's own mechanics, on a real server: one cluster for the suite,
/// a new database per test. Wake-ups across instances (LISTEN/NOTIFY), the claim's
/// partial index, the pool, restarts, the URL. Every scenario both stores share is one
/// body run on both (`StoreKind`: OutboxTests, RegistryTests, UpgradeTests and the
/// like; SeveralInstancesTests for instances racing); ConcurrencyTests is SQLite's
/// side of the mechanics.
@Suite(.postgresCluster) struct PostgresStoreTests {
    // MARK: Wake-ups and the claim

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
                EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) \(OutboxStatements.claimLeaseLocked.postgres
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
