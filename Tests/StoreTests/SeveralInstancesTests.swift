import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Store

/// Several processes on one database, one body on both stores: stores opened
/// side by side stand for instances (SQLite: two on one file, each with its own
/// connections and only the file's locks between them; PostgreSQL: four on one
/// database). Workers racing for the outbox never hold one delivery twice, enqueues
/// racing claims join one batching window, channels and broadcasts are taken once,
/// and instances that start at once on a new database migrate it once.
@Suite(.postgresCluster) struct SeveralInstancesTests {
    /// Instances for `kind`: SQLite is one writer at a time, so two make the race.
    static func instances(_ kind: StoreKind) -> Int { kind == .sqlite ? 2 : 4 }

    @Test(arguments: StoreKind.allCases)
    func workersClaimingAtOnceNeverHoldTheSameDelivery(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: Self.instances(kind)) { stores in
            for n in 0..<5 { try await enqueueMany(stores[0], "n\(n)", count: 1_000) }

            // Three workers an instance claim in small batches (leases outlive the test)
            // until nothing is free; every second batch is finished at once, so claims
            // interleave with deletes. Each waits after its first batch until all have
            // one, so that they all race (SQLite's busy waiting is not fair: one store
            // could otherwise take everything).
            let workers = 3 * stores.count
            let started = Started()
            let claims = try await withThrowingTaskGroup(of: (worker: Int, ids: [Int64]).self) { group in
                for worker in 0..<workers {
                    let store = stores[worker % stores.count]
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let batch = try await store.claim(worker: "w\(worker)", limit: 37,
                                                              leaseMillis: 3_600_000, now: 10)
                            if batch.isEmpty { return (worker, mine) }
                            if mine.isEmpty {
                                started.count.withLock { $0 += 1 }
                                while started.count.withLock({ $0 }) < workers { try await Task.sleep(for: .milliseconds(1)) }
                            }
                            mine += batch.map(\.id)
                            if mine.count % 2 == 0 {
                                #expect(try await store.finish(worker: "w\(worker)", batch.map { delivered($0.id) },
                                                               now: 11) == 0)
                            }
                        }
                    }
                }
                var all = Array(repeating: [Int64](), count: workers)
                for try await (worker, ids) in group { all[worker] = ids }
                return all
            }
            let all = claims.flatMap { $0 }
            #expect(all.count == 5_000)
            #expect(Set(all).count == 5_000)
            // Every instance took part, or the test proves nothing.
            for instance in 0..<stores.count {
                #expect(claims.indices.filter { $0 % stores.count == instance }.map { claims[$0].count }.reduce(0, +) > 0,
                        "instance \(instance)")
            }
            #expect(try await stores[0].scalar("""
                SELECT count(*) FROM deliveries d
                WHERE d.state = 'pending' AND NOT EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
                """)
                    == stores[0].scalar("SELECT count(*) FROM outbox"))
            #expect(try await stores[0].scalar("SELECT count(*) FROM outbox WHERE claimed_by IS NULL") == 0)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func migratingTwiceAndFromSeveralInstancesAtOnceIsHarmless(_ kind: StoreKind) async throws {
        for _ in 0..<3 {
            try await withNewDatabase(kind, instances: Self.instances(kind)) { stores in
                // Instances starting at once on an empty database.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in stores { group.addTask { try await store.migrate() } }
                    try await group.waitForAll()
                }
                try await stores[0].migrate()
                #expect(try await Self.stepsApplied(kind, stores[0]) == Schema.steps.count)
                #expect(try await stores[0].scalar("SELECT count(*) FROM outbox") == 0, "the outbox is there")
                if let file = stores[0] as? SQLiteStore {
                    #expect(FileManager.default.fileExists(atPath: file.path + "-wal"), "WAL, turned on by the first to open")
                }

                // Migrating keeps what is there.
                try await register(stores[0], "u1", 1)
                try await stores[stores.count - 1].migrate()
                #expect(try await stores[stores.count - 1].devices(userID: "u1").count == 1)
            }
        }
    }

    /// Enqueues on every instance at once for one device's window, while workers
    /// claim its carrier: every member ends carried by exactly one carrier, and each
    /// carrier went out with the members it had when it was claimed (none joined a
    /// carrier already taken, whose payload was on its way).
    @Test(arguments: StoreKind.allCases)
    func enqueuesOnSeveralInstancesJoinOneWindowAndNeverATakenOne(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: Self.instances(kind)) { stores in
            let members = 200
            func member(_ i: Int) -> NewDelivery {
                // Due at once (the carrier may be claimed any time), the window open for long.
                NewDelivery(userID: "u1", deviceID: 1, token: token(1), environment: "production", apnsID: "m\(i)",
                            payload: Array(#"{"aps":{"alert":"\#(i)"}}"#.utf8), notBefore: 1,
                            hold: Hold(kind: .coalesce(carrierAPNsID: "c\(i)", carrierCollapseID: "job"), key: "job",
                                       closesAt: 1_000_000))
            }
            let claimedBatches = try await withThrowingTaskGroup(of: [ClaimedDelivery].self) { group in
                for instance in stores.indices {
                    group.addTask {
                        for i in stride(from: instance, to: members, by: stores.count) {
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
                            let batch = try await stores[worker % stores.count].claim(worker: "w\(worker)", limit: 10,
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
    /// claimed by workers on every instance at once are never held by two.
    @Test(arguments: StoreKind.allCases)
    func channelsAndBroadcastsAcrossInstances(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: Self.instances(kind)) { stores in
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
                try await stores[i % stores.count].enqueueBroadcast(NewBroadcast(id: "b\(i)", channel: channel, payload: Array("{}".utf8),
                                                                      priority: 10, expiration: 0), now: 1)
            }
            let claimed = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let batch = try await stores[worker % stores.count].claimBroadcasts(worker: "w\(worker)", limit: 7,
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

    /// How many schema steps the database has: the one place the engines keep it differently.
    static func stepsApplied(_ kind: StoreKind, _ store: any TestStore) async throws -> Int {
        switch kind {
        case .sqlite: Int(try await store.scalar("PRAGMA user_version") ?? -1)
        case .postgres: Int(try await store.scalar("SELECT count(*) FROM schema_migrations") ?? -1)
        }
    }
}

/// `instances` stores of `kind` on one new database that nobody has migrated (SQLite:
/// a new file, opened by each, WAL turned on by the first), closed after `body`.
func withNewDatabase<T>(_ kind: StoreKind, instances: Int,
                        _ body: ([any TestStore]) async throws -> T) async throws -> T {
    switch kind {
    case .sqlite:
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let path = scratch.path("apns.db")
        return try await body(try (0..<instances).map { _ in try SQLiteStore(path: path, busyTimeout: .seconds(30)) })
    case .postgres:
        return try await withPostgres(url: try await suiteCluster().newDatabase(), instances: instances) { try await body($0) }
    }
}

/// How many workers have their first batch.
private final class Started: Sendable {
    let count = Mutex(0)
}
