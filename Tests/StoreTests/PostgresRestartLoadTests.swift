import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Store

/// The database restarts while workers are busy: four loops share one store, each
/// enqueuing, claiming, renewing and finishing without pause, as the service's
/// workers do. After a restart every loop must get going again (a call that meets the
/// restart fails with a StoreError, which a worker handles by trying again), and in
/// the end every delivery is final exactly once and none is lost.
///
/// A cluster of its own: restarting it would disturb the suite's other tests.
@Suite struct PostgresRestartLoadTests {
    static let loops = 4
    static let restarts = 3

    @Test func everyLoopGoesOnAfterTheDatabaseRestartsUnderLoadAndNothingIsLost() async throws {
        let cluster = try await PostgresCluster.make()
        defer { cluster.stop() }
        let store = try PostgresStore(url: try await cluster.newDatabase())
        try await store.migrate()
        let progress = Progress(loops: Self.loops)

        let workers = (0..<Self.loops).map { loop in
            Task { await Self.work(loop, store, progress) }
        }

        for round in 1...Self.restarts {
            // Every loop is busy before the restart…
            try await progress.waitForEachLoop(after: progress.snapshot(), steps: 3, within: .seconds(120),
                                               "before restart \(round)")
            try await cluster.restartOffPool()
            // …and gets going again after it. A hung call never returns: the bound
            // (generous, a restart costs a few seconds) turns that into a failure.
            try await progress.waitForEachLoop(after: progress.snapshot(), steps: 3, within: .seconds(120),
                                               "after restart \(round)")
        }

        progress.stop()
        for worker in workers { await worker.value }

        // Whatever the restarts left claimed (a claim that committed but whose answer
        // was lost) is taken once its lease ends, and finished.
        let later = Int64.max / 4
        while true {
            let rest = try await store.claim(worker: "drain", limit: 500, leaseMillis: 60_000, now: later)
            if rest.isEmpty { break }
            #expect(try await store.finish(worker: "drain", rest.map { delivered($0.id) }, now: later) == 0)
        }

        // Nothing lost: every enqueue that returned is there, whole; every delivery is
        // final, out of the outbox, and finished once (its one `results` row, keyed by
        // the delivery: a second finish adds nothing).
        let enqueued = progress.enqueued.withLock { $0 }
        #expect(enqueued.count > 0)
        for id in enqueued {
            #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE notification_id = '\(id)'")
                    == Int64(Self.perNotification), "notification \(id)")
        }
        #expect(try await store.scalar("SELECT count(*) FROM outbox") == 0)
        #expect(try await store.scalar("""
            SELECT count(*) FROM deliveries d
            WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id AND r.state = 'delivered')
            """) == 0)
        #expect(try await store.scalar("SELECT count(*) FROM results") == store.scalar("SELECT count(*) FROM deliveries"))
        // Every notification row has all its deliveries (an enqueue is all or nothing).
        #expect(try await store.scalar("""
            SELECT count(*) FROM notifications n
            WHERE (SELECT count(*) FROM deliveries d WHERE d.notification_id = n.id) <> \(Self.perNotification)
            """) == 0)
        await store.close()
    }

    static let perNotification = 5

    /// One worker: enqueue a notification, claim a batch, renew it, finish it; a
    /// StoreError (the database is away) is retried after a short pause, as the
    /// service's worker does.
    static func work(_ loop: Int, _ store: PostgresStore, _ progress: Progress) async {
        let worker = "w\(loop)"
        var n = 0
        func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }
        while !progress.stopped {
            do {
                n += 1
                let id = "l\(loop)-\(n)"
                try await enqueue(store, id, (0..<perNotification).map { (user: "u\(loop)", device: Int64(loop * 1_000 + $0)) },
                                  now: now())
                progress.enqueued.withLock { _ = $0.insert(id) }
                let batch = try await store.claim(worker: worker, limit: 10, leaseMillis: 600_000, now: now())
                try await store.renew(worker: worker, deliveryIDs: batch.map(\.id), leaseMillis: 600_000, now: now())
                _ = try await store.finish(worker: worker, batch.map { delivered($0.id) }, now: now())
                progress.step(loop)
            } catch {
                try? await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// What the loops have done: steps completed per loop, notifications enqueued.
    final class Progress: Sendable {
        let steps: Mutex<[Int]>
        let enqueued = Mutex(Set<String>())
        private let stopFlag = Mutex(false)

        init(loops: Int) { steps = Mutex(Array(repeating: 0, count: loops)) }

        func step(_ loop: Int) { steps.withLock { $0[loop] += 1 } }
        func snapshot() -> [Int] { steps.withLock { $0 } }
        func stop() { stopFlag.withLock { $0 = true } }
        var stopped: Bool { stopFlag.withLock { $0 } }

        /// Returns once every loop has made `steps` more steps than in `before`;
        /// throws, naming the loops that did not, after `within`.
        func waitForEachLoop(after before: [Int], steps: Int, within bound: Duration, _ when: String) async throws {
            let clock = ContinuousClock(), deadline = clock.now + bound
            while true {
                let stuck = snapshot().indices.filter { snapshot()[$0] < before[$0] + steps }
                if stuck.isEmpty { return }
                if clock.now > deadline {
                    stop()
                    throw LoopsStuck(description: "\(when): loops \(stuck) made no progress for \(bound)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}

/// Loops that stopped making progress: a call that never returned.
struct LoopsStuck: Error, CustomStringConvertible {
    let description: String
}
