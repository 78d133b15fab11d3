import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Store

/// Moving a SQLite store to PostgreSQL (`StoreCopy`): every table arrives row for
/// row, held and pending deliveries are claimed there as they were, a copy stopped
/// part-way resumes without duplicates, and bad input writes nothing.
@Suite(.postgresCluster) struct StoreCopyTests {
    /// A SQLite store with a row in every table, made through the store's own calls.
    static func filledSQLite(_ scratch: Scratch) async throws -> SQLiteStore {
        let store = try await makeStore(scratch)
        let d1 = try await register(store, "u1", 1, company: "c1")
        let d2 = try await register(store, "u2", 2, company: "c1")
        _ = try await register(store, "u3", 3)
        #expect(try await store.unregister(userID: "u3", token: token(3), now: 2))
        try await store.updatePreferences(userID: "u1", appType: "staff",
                                          ["orders": false, "quietHoursStart": "22:00", "timeZone": "Europe/Paris"],
                                          now: 3)
        try await store.registerLiveActivity(LiveActivityRegistration(userID: "u1", token: token(10), appType: "staff",
                                                                      kind: .update(activityID: "a1"), attributesType: "Attrs"),
                                             now: 4)
        try await store.registerLiveActivity(LiveActivityRegistration(userID: "u2", token: token(11), appType: "staff",
                                                                      kind: .start, attributesType: "Attrs"), now: 4)
        let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
        let channel = try await store.addChannel(ChannelRow(key: key, channelID: "AAAA", storagePolicy: 1, createdAt: 5),
                                                 audience: ChannelAudience(userIDs: ["u1", "u2"], companyID: "c1"))
        try await store.enqueueBroadcast(NewBroadcast(id: "b1", channel: channel, payload: Array("{}".utf8), priority: 10,
                                                      expiration: 0), now: 6)

        // Sent and answered (results, device_use), then pending, batched and quiet-hours-held.
        try await enqueue(store, "sent", [("u1", d1), ("u2", d2)], now: 10)
        let sent = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 11)
        _ = try await store.finish(worker: "w", sent.map { delivered($0.id, status: $0.delivery.userID == "u1" ? 200 : 410) },
                                   now: 12)
        try await enqueue(store, "pending", [("u1", d1)], now: 20)
        func held(_ apnsID: String, _ device: Int64, hold: Hold) -> NewDelivery {
            NewDelivery(userID: "u\(device)", deviceID: device, token: token(Int(device)), environment: "production",
                        apnsID: apnsID, payload: Array(#"{"aps":{"alert":"\#(apnsID)"}}"#.utf8),
                        collapseID: apnsID, notBefore: 90_000, hold: hold)
        }
        try await store.enqueue(NewNotification(id: "batched", type: "taskUpdate", entityType: "task", entityID: "t1",
                                                appType: "staff"),
                                [held("m0", d1, hold: Hold(kind: .coalesce(carrierAPNsID: "carrier", carrierCollapseID: "u|t|k"),
                                                          key: "k", closesAt: 90_000))], now: 30)
        try await store.enqueue(NewNotification(id: "quiet", type: "taskUpdate", entityType: "task", entityID: "t2",
                                                appType: "staff"),
                                [held("q0", d1, hold: Hold(kind: .defer, key: "trip", closesAt: 90_000))], now: 31)
        // A later deferred delivery supersedes q0: a row that names one inserted after it.
        try await store.enqueue(NewNotification(id: "quiet2", type: "taskUpdate", entityType: "task", entityID: "t2",
                                                appType: "staff"),
                                [held("q1", d1, hold: Hold(kind: .defer, key: "trip", closesAt: 90_000))], now: 32)
        // One attempt already made on the pending delivery: a retry keeps its count.
        let pending = try #require(try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 40).first)
        #expect(pending.delivery.apnsID == "pending-0")
        try await store.release(worker: "w", deliveryIDs: [pending.id], availableAt: 41, now: 40)
        // A fan-out whose process died while planning it: its mark and its part go as
        // they are, never sent there either, and the target discards it as its own.
        let plan = NewNotification(id: "planning", type: "t", entityType: nil, entityID: nil, appType: "staff")
        try await store.beginFanOut(plan, now: 45, planningUntil: 46)
        _ = try await store.addFanOutPart(plan, [held("p0", d2, hold: Hold(kind: .defer, key: "p", closesAt: 1))],
                                          payloads: [:], now: 45, planningUntil: 47)
        return store
    }

    /// A table's rows on either side, as text alike on both (booleans 0/1, bytes in
    /// hex), sorted.
    static func rows(_ table: CopyPlan.Table, sqlite: SQLiteStore) async throws -> [[String?]] {
        let columns = table.columns.map { "CASE WHEN typeof(\(quoted($0))) = 'blob' THEN upper(hex(\(quoted($0)))) ELSE CAST(\(quoted($0)) AS TEXT) END" }
        return try await sqlite.texts("SELECT \(columns.joined(separator: ", ")) FROM \(quoted(table.name))")
            .sorted { $0.description < $1.description }
    }

    static func rows(_ table: CopyPlan.Table, postgres: PostgresStore) async throws -> [[String?]] {
        let types = Dictionary(uniqueKeysWithValues: try await postgres.texts("""
            SELECT column_name, data_type FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = '\(table.name)'
            """).map { ($0[0]!, $0[1]!) })
        let columns = table.columns.map { c in
            switch types[c] {
            case "boolean": "(\(quoted(c))::int)::text"
            case "bytea": "upper(encode(\(quoted(c)), 'hex'))"
            default: "\(quoted(c))::text"
            }
        }
        return try await postgres.texts("SELECT \(columns.joined(separator: ", ")) FROM \(quoted(table.name))")
            .sorted { $0.description < $1.description }
    }

    /// Rows in the tables the copy writes (those that exist yet).
    static func totalRows(_ store: some TestStore) async throws -> Int64 {
        var total: Int64 = 0
        for table in CopyPlan.current.tables {
            if let tables = try? await store.scalar("SELECT count(*) FROM \(quoted(table.name))") { total += tables }
        }
        return total
    }

    static func copy(_ sqlite: SQLiteStore, to url: String,
                     _ options: StoreCopy.Options = StoreCopy.Options()) async throws -> [StoreCopy.Count] {
        try await StoreCopy(from: sqlite.path, to: try PostgresStore.Configuration(url: url), options: options)
            .run { _ in }
    }

    @Test func everyTableArrivesRowForRowAndHeldDeliveriesAreClaimedAsTheyWere() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        let url = try await suiteCluster().newDatabase()
        // Small batches, so that rows refer to rows of later batches.
        let counts = try await Self.copy(sqlite, to: url, StoreCopy.Options(batchSize: 2))
        #expect(counts.filter { !$0.matches }.isEmpty, "\(counts)")
        #expect(Set(counts.map(\.table)) == Set(CopyPlan.current.tables.map(\.name)))
        for table in ["devices", "preferences", "live_activity_tokens", "channels", "channel_users", "broadcasts",
                      "notifications", "deliveries", "outbox", "holds", "results", "device_use", "live_activities"] {
            #expect((counts.first { $0.table == table }?.source ?? 0) > 0, "the fixture has no \(table) row")
        }

        let postgres = try PostgresStore(url: url)
        try await postgres.migrate()
        for table in CopyPlan.current.tables {
            let want = try await Self.rows(table, sqlite: sqlite)
            let got = try await Self.rows(table, postgres: postgres)
            #expect(got == want, "\(table.name)")
        }
        #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'store_copy_progress'") == 0)

        // Due: the pending delivery (one attempt made); at 90 s the held ones.
        let now = try await postgres.claim(worker: "pg", limit: 10, leaseMillis: 1_000, now: 50)
        #expect(now.map(\.delivery.apnsID) == ["pending-0"])
        #expect(now.first?.attempts == 1)
        _ = try await postgres.finish(worker: "pg", now.map { delivered($0.id, at: 60, attempts: 2) }, now: 60)
        for apnsID in ["q0", "q1", "m0", "carrier"] {
            let want = try await sqlite.delivery(apnsID: apnsID)
            #expect(try await postgres.delivery(apnsID: apnsID) == want, "\(apnsID)")
        }
        #expect(try await postgres.delivery(apnsID: "q0")?.carriedBy == "q1")
        #expect(try await postgres.delivery(apnsID: "q1")?.notBefore == 90_000)
        #expect(try await postgres.claim(worker: "pg", limit: 10, leaseMillis: 1_000, now: 89_999).isEmpty)
        let due = try await postgres.claim(worker: "pg", limit: 10, leaseMillis: 1_000, now: 90_000)
        #expect(Set(due.map(\.delivery.apnsID)) == ["carrier", "q1"])
        #expect(due.first { $0.delivery.apnsID == "carrier" }?.batched == 1)
        #expect(try await postgres.scalar("SELECT planning_until FROM notifications WHERE id = 'planning'") == 47)
        #expect(try await postgres.discardPlans(before: 48) == 1)
        #expect(try await postgres.delivery(apnsID: "p0") == nil)

        // New rows take new ids past the copied ones.
        let device = try await register(postgres, "u9", 9)
        #expect(device > (try await sqlite.scalar("SELECT max(id) FROM devices") ?? 0))
        try await enqueue(postgres, "after", [("u9", device)], now: 100)
        await postgres.close()
    }

    @Test func aCopyStoppedPartWayResumesWithoutDuplicates() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        try await enqueueMany(sqlite, "many", count: 57)
        let url = try await suiteCluster().newDatabase()
        var options = StoreCopy.Options(batchSize: 10)
        options.stopAfterBatches = 12
        await #expect(throws: StoreCopy.Interrupted.self) { try await Self.copy(sqlite, to: url, options) }

        let postgres = try PostgresStore(url: url)
        let all = try await Self.totalRows(sqlite)
        let partial = try await Self.totalRows(postgres)
        #expect(partial > 0 && partial < all, "\(partial) of \(all)")
        // A second stop, then the end; each run picks up where the last one stopped.
        await #expect(throws: StoreCopy.Interrupted.self) { try await Self.copy(sqlite, to: url, options) }
        let counts = try await Self.copy(sqlite, to: url, StoreCopy.Options(batchSize: 10))
        #expect(counts.filter { !$0.matches }.isEmpty, "\(counts)")
        for table in CopyPlan.current.tables {
            #expect(try await Self.rows(table, postgres: postgres) == (try await Self.rows(table, sqlite: sqlite)), "\(table.name)")
        }
        // Finished: a further run finds a non-empty target.
        await #expect(throws: StoreCopy.Refusal.self) { try await Self.copy(sqlite, to: url) }
        await postgres.close()
    }

    @Test func aNonEmptyTargetIsRefusedUnlessAskedAndNothingIsWritten() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        try await withPostgres { postgres in
            try await register(postgres, "other", 99)
            let url = postgres.configuration
            let refusal = await #expect(throws: StoreCopy.Refusal.self) {
                try await StoreCopy(from: sqlite.path, to: url).run { _ in }
            }
            #expect(refusal?.description.contains("not empty (table devices has 1 rows)") == true, "\(String(describing: refusal))")
            #expect(try await postgres.scalar("SELECT count(*) FROM deliveries") == 0)
            #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'store_copy_progress'") == 0)

            let counts = try await StoreCopy(from: sqlite.path, to: url, options: StoreCopy.Options(intoNonEmpty: true))
                .run { _ in }
            // Rows with the same keys are the source's now.
            #expect(counts.filter { !$0.matches }.isEmpty, "\(counts)")
        }
    }

    @Test func aSourceThatIsNotAnAPNsServerDatabaseAtThisStepIsRefused() async throws {
        let scratch = Scratch()
        let url = try PostgresStore.Configuration(url: try await suiteCluster().newDatabase())
        func refusal(_ path: String) async -> String? {
            let error = await #expect(throws: StoreCopy.Refusal.self) { try await StoreCopy(from: path, to: url).run { _ in } }
            return error?.description
        }
        _ = FileManager.default.createFile(atPath: scratch.path("random"), contents: Data((0..<4096).map { UInt8($0 % 251) }))
        #expect(await refusal(scratch.path("random"))?.contains("is not an apns-server database") == true)
        let other = try SQLiteStore(path: scratch.path("other.db"))
        try await other.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1)")
        #expect(await refusal(scratch.path("other.db"))?.contains("is not an apns-server database (it has no table") == true)
        #expect(await refusal(scratch.path("missing.db"))?.contains("does not exist") == true)
        #expect(!FileManager.default.fileExists(atPath: scratch.path("missing.db")))

        let newer = try await makeStore(scratch, "newer.db")
        try await newer.execute("PRAGMA user_version = \(Schema.steps.count + 1)")
        #expect(await refusal(newer.path)?.contains("newer than this program's \(Schema.steps.count)") == true)
        let older = try SQLiteStore(path: scratch.path("older.db"))
        try await older.migrate(through: Schema.steps.count - 1)
        #expect(await refusal(older.path)?.contains("start this apns-server once on it") == true)

        // Nothing reached the target.
        let postgres = PostgresStore(url)
        #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == 0)
        await postgres.close()
    }

    @Test func anUnreachableTargetIsOneLine() async throws {
        let scratch = Scratch()
        let sqlite = try await makeStore(scratch)
        let port = freePort()
        let error = await #expect(throws: StoreCopy.Refusal.self) {
            try await StoreCopy(from: sqlite.path,
                                to: try PostgresStore.Configuration(url: "postgres://u@127.0.0.1:\(port)/db?sslmode=disable"))
                .run { _ in }
        }
        #expect(error?.description.contains("cannot reach PostgreSQL at 127.0.0.1:\(port)") == true, "\(String(describing: error))")
        #expect(error?.description.contains("\n") == false)
    }

    /// A source another process is writing to is refused, with nothing written; and
    /// while a copy runs, nothing else can write to its source.
    @Test func aSourceInUseIsRefusedAndACopysSourceCannotBeWrittenMeanwhile() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        let url = try PostgresStore.Configuration(url: try await suiteCluster().newDatabase())
        // A server's write in progress: another store on the file holds its write lock.
        let server = try SQLiteStore(path: sqlite.path, busyTimeout: .milliseconds(10))
        let (held, release) = (Flag(), Flag())
        let holding = Task { try await server.holdWriteLock(held: { held.set() }, until: { release.isSet }) }
        while !held.isSet { try await Task.sleep(for: .milliseconds(5)) }
        let refusal = await #expect(throws: StoreCopy.Refusal.self) { try await StoreCopy(from: sqlite.path, to: url).run { _ in } }
        #expect(refusal?.description.contains("is in use") == true, "\(String(describing: refusal))")
        release.set()
        try await holding.value
        let postgres = PostgresStore(url)
        #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == 0)

        // Each write tried during the copy finds the source locked; after it, it goes.
        let writes = Mutex<[String]>([])
        let counts = try await StoreCopy(from: sqlite.path, to: url, options: StoreCopy.Options(batchSize: 2)).run { _ in
            let outcome: String
            do {
                try server.executeWaiting("UPDATE devices SET device_name = 'written' WHERE id = 1")
                outcome = "written"
            } catch {
                outcome = (error as? StoreError)?.isTemporary == true ? "busy" : "\(error)"
            }
            writes.withLock { $0.append(outcome) }
        }
        #expect(counts.filter { !$0.matches }.isEmpty, "\(counts)")
        let outcomes = writes.withLock { $0 }
        #expect(!outcomes.isEmpty && outcomes.allSatisfy { $0 == "busy" }, "\(outcomes)")
        try await server.execute("UPDATE devices SET device_name = 'written' WHERE id = 1")
        await postgres.close()
    }

    /// A partial copy resumes from its own source as it was, wherever the file is
    /// now; a source changed since, or a partial copy that names none, is refused.
    @Test func aCopyResumesOnlyFromTheSourceItBeganWithUnchanged() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        try await enqueueMany(sqlite, "many", count: 30)
        let url = try await suiteCluster().newDatabase()
        var options = StoreCopy.Options(batchSize: 10)
        options.stopAfterBatches = 4
        await #expect(throws: StoreCopy.Interrupted.self) { try await Self.copy(sqlite, to: url, options) }

        // The same rows in another file: the same source.
        let moved = scratch.path("moved.db")
        try await sqlite.vacuum(into: moved)
        // One value changed, no row added or removed: no longer the source copied.
        try await sqlite.execute("UPDATE devices SET device_name = 'renamed' WHERE id = 1")
        let refusal = await #expect(throws: StoreCopy.Refusal.self) { try await Self.copy(sqlite, to: url, options) }
        #expect(refusal?.description.contains("is not that (it changed since, or is another database)") == true,
                "\(String(describing: refusal))")
        #expect(refusal?.description.contains("copy into a new empty database") == true)

        let postgres = try PostgresStore(url: url)
        let counts = try await StoreCopy(from: moved, to: try PostgresStore.Configuration(url: url)).run { _ in }
        #expect(counts.filter { !$0.matches }.isEmpty, "\(counts)")
        #expect(try await postgres.scalar("SELECT count(*) FROM devices WHERE device_name = 'renamed'") == 0)
        #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'store_copy_%'") == 0)

        // A partial copy that does not say which source it is of.
        let other = try await suiteCluster().newDatabase()
        await #expect(throws: StoreCopy.Interrupted.self) { try await Self.copy(sqlite, to: other, options) }
        let target = try PostgresStore(url: other)
        try await target.execute("DROP TABLE store_copy_source")
        let unnamed = await #expect(throws: StoreCopy.Refusal.self) { try await Self.copy(sqlite, to: other) }
        #expect(unnamed?.description.contains("does not say which source it is from") == true, "\(String(describing: unnamed))")
        await target.close()
        await postgres.close()
    }

    /// Where running the copy again cannot get further, neither error says to: a
    /// target at a newer step is refused before anything is written, whatever the
    /// options; rows of the target's own that conflict with the source's stop it
    /// with what to do instead.
    @Test func aCopyThatARerunCannotFinishSaysWhatToDoInstead() async throws {
        let scratch = Scratch()
        let sqlite = try await Self.filledSQLite(scratch)
        try await withPostgres { postgres in
            try await postgres.execute("INSERT INTO schema_migrations (version, name) VALUES (\(Schema.steps.count + 1), 'newer')")
            let refusal = await #expect(throws: StoreCopy.Refusal.self) {
                try await StoreCopy(from: sqlite.path, to: postgres.configuration,
                                    options: StoreCopy.Options(intoNonEmpty: true)).run { _ in }
            }
            #expect(refusal?.description.contains("newer than this program's \(Schema.steps.count): copy with the apns-server release that made it") == true,
                    "\(String(describing: refusal))")
            #expect(try await postgres.scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'store_copy_progress'") == 0)
        }
        try await withPostgres { postgres in
            // The source's device 1 has token 1; here token 1 is device 2's.
            _ = try await register(postgres, "x", 99)
            _ = try await register(postgres, "y", 1)
            let stopped = await #expect(throws: StoreCopy.Stopped.self) {
                try await StoreCopy(from: sqlite.path, to: postgres.configuration,
                                    options: StoreCopy.Options(intoNonEmpty: true)).run { _ in }
            }
            #expect(stopped?.reason.contains("duplicate key") == true, "\(String(describing: stopped))")
            #expect(stopped?.next == StoreCopy.Stopped.conflict)
            #expect(stopped?.description.contains("run it again") == false)
        }
    }
}

/// A one-way switch two threads share.
private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
