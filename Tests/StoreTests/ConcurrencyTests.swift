import Synchronization
import Foundation
import Testing
import TestSupport
@testable import Store

/// Two stores on one file stand for two processes: each has its own connections, and
/// only SQLite's file locks stand between them.
@Suite struct ConcurrencyTests {
    @Test func twoStoresClaimingAtOnceNeverHoldTheSameDelivery() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let first = try await makeStore(scratch)
        let second = try SQLiteStore(path: first.path, busyTimeout: .seconds(30))
        for n in 0..<5 { try await enqueueMany(first, "n\(n)", count: 1_000) }

        // Eight workers, four per store, claim in small batches (leases outlive the test)
        // until the outbox has nothing free; every second batch is finished at once, so
        // claims interleave with deletes.
        // SQLite's busy waiting is not fair, so one store could take everything: every
        // worker waits after its first batch until all eight have one, then they race.
        let started = Started()
        let claims = try await withThrowingTaskGroup(of: (worker: Int, ids: [Int64]).self) { group in
            for worker in 0..<8 {
                let store = worker % 2 == 0 ? first : second
                group.addTask {
                    var mine: [Int64] = []
                    while true {
                        let batch = try await store.claim(worker: "w\(worker)", limit: 37, leaseMillis: 3_600_000, now: 10)
                        if batch.isEmpty { return (worker, mine) }
                        if mine.isEmpty {
                            started.count.withLock { $0 += 1 }
                            while started.count.withLock({ $0 }) < 8 { try await Task.sleep(for: .milliseconds(1)) }
                        }
                        mine += batch.map(\.id)
                        if mine.count % 2 == 0 {
                            _ = try await store.finish(worker: "w\(worker)", batch.map { delivered($0.id) }, now: 11)
                        }
                    }
                }
            }
            var all = Array(repeating: [Int64](), count: 8)
            for try await (worker, ids) in group { all[worker] = ids }
            return all
        }
        let all = claims.flatMap { $0 }
        #expect(all.count == 5_000)
        #expect(Set(all).count == 5_000)
        // Both stores took part (workers 0, 2, 4, 6 use the first), or the test proves nothing.
        let byFirst = claims.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.count).reduce(0, +)
        #expect(byFirst > 0 && byFirst < 5_000)
        #expect(try await first.scalar("""
            SELECT count(*) FROM deliveries d
            WHERE d.state = 'pending' AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
            """) == first.scalar("SELECT count(*) FROM outbox"))
    }

    @Test func migratingTwiceAndFromTwoStoresAtOnceIsHarmless() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        // Two processes starting on a new file: each opens (turning WAL on) and migrates at once.
        for round in 0..<5 {
            let path = scratch.path("fresh\(round)/apns.db")
            let stores = try await withThrowingTaskGroup(of: SQLiteStore.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        let store = try SQLiteStore(path: path)
                        try await store.migrate()
                        return store
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let (a, b) = (stores[0], stores[1])
            try await a.migrate()
            #expect(try await a.scalar("PRAGMA user_version") == Int64(Migrations.steps.count))
            #expect(try await a.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'outbox'") == 1)
            #expect(FileManager.default.fileExists(atPath: path + "-wal"))

            // Migrating keeps what is there.
            try await register(a, "u1", 1)
            try await b.migrate()
            #expect(try await b.devices(userID: "u1").count == 1)
        }
    }

    @Test func aWriterThatWaitsPastTheBusyTimeoutSaysTheDatabaseIsLocked() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let holder = try await makeStore(scratch)
        let waiter = try SQLiteStore(path: holder.path, busyTimeout: .milliseconds(50))
        let (locked, signal) = AsyncStream<Void>.makeStream()
        let release = Mutex(false)
        let held = Task {
            try await holder.holdWriteLock(held: { signal.yield() }, until: { release.withLock { $0 } })
        }
        for await _ in locked { break }
        let error = await #expect(throws: StoreError.self) {
            _ = try await waiter.claim(worker: "w", limit: 1, leaseMillis: 1, now: 1)
        }
        #expect(error?.description == "claim: database is locked")
        // Reads do not wait for the writer (WAL).
        #expect(try await waiter.outboxDepth() == 0)
        release.withLock { $0 = true }
        try await held.value
    }
}

/// How many workers have their first batch.
private final class Started: Sendable {
    let count = Mutex(0)
}
