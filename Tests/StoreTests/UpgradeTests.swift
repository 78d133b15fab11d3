import Foundation
import Testing
@testable import Store
import TestSupport

/// A database the last release made and filled, upgraded in place by this program:
/// every table keeps its rows, the log reads as it did, and what was waiting to be
/// sent (pending, leased, held by quiet hours) still goes, with its own apns-id.
/// One body for both engines; only the filling is spelled per engine.
@Suite(.postgresCluster) struct UpgradeTests {
    @Test(arguments: StoreKind.allCases)
    func anUpgradeFromTheReleasedSchemaLosesNothing(_ kind: StoreKind) async throws {
        switch kind {
        case .sqlite:
            let scratch = Scratch()
            defer { withExtendedLifetime(scratch) {} }
            let store = try SQLiteStore(path: scratch.path("released.db"))
            try await store.execute(ReleasedSQLiteSchema.script)
            try await store.execute((Self.rows(kind) + Self.sqliteOnlyRows).joined(separator: ";\n"))
            try await store.migrate()
            #expect(try await store.scalar("PRAGMA user_version") == Int64(Schema.steps.count))
            #expect(try await store.scalar("SELECT count(*) FROM pragma_foreign_key_check") == 0)
            let fresh = try await withStore(kind) { try await Self.layout($0, kind) }
            #expect(try await Self.layout(store, kind) == fresh, "the same schema as a new file's")
            try await Self.check(store)
        case .postgres:
            let store = try PostgresStore(url: try await suiteCluster().newDatabase())
            do {
                for statement in ReleasedPostgresSchema.statements + Self.rows(kind) + Self.postgresOnlyRows {
                    try await store.execute(statement)
                }
                try await store.migrate()
                #expect(try await store.scalar("SELECT count(*) FROM schema_migrations") == Int64(Schema.steps.count))
                #expect(try await store.scalar("SELECT max(version) FROM schema_migrations") == Int64(Schema.steps.count))
                let fresh = try await withStore(kind) { try await Self.layout($0, kind) }
                #expect(try await Self.layout(store, kind) == fresh, "the same schema as a new database's")
                try await Self.check(store)
                // A second start finds nothing to do.
                try await store.migrate()
                #expect(try await store.scalar("SELECT count(*) FROM schema_migrations") == Int64(Schema.steps.count))
                await store.close()
            } catch {
                await store.close()
                throw error
            }
        }
    }

    /// A database at any step the last release knew upgrades to the same schema as a
    /// new one: on PostgreSQL, whose own old numbering is mapped onto the one history
    /// (`Schema.postgresNumberingBefore12`), and on SQLite.
    @Test(arguments: 1...6) func aPostgresDatabaseAtEachReleasedStepUpgrades(_ step: Int) async throws {
        let fresh = try await withStore(.postgres) { try await Self.layout($0, .postgres) }
        let store = try PostgresStore(url: try await suiteCluster().newDatabase())
        do {
            for statement in ReleasedPostgresSchema.statements(through: step) { try await store.execute(statement) }
            try await store.migrate()
            #expect(try await Self.layout(store, .postgres) == fresh)
            #expect(try await store.scalar("SELECT count(*) FROM schema_migrations") == Int64(Schema.steps.count))
            await store.close()
        } catch {
            await store.close()
            throw error
        }
    }

    @Test(arguments: 1...11) func aSQLiteFileAtEachReleasedStepUpgrades(_ step: Int) async throws {
        let fresh = try await withStore(.sqlite) { try await Self.layout($0, .sqlite) }
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let store = try SQLiteStore(path: scratch.path("released.db"))
        try await store.execute(ReleasedSQLiteSchema.script(through: step))
        try await store.migrate()
        #expect(try await Self.layout(store, .sqlite) == fresh)
        #expect(try await store.scalar("PRAGMA user_version") == Int64(Schema.steps.count))
    }

    /// Step n means the same on both engines: at the last step, both have the same
    /// tables with the same columns, the same indexes and the same triggers.
    @Test func bothEnginesEndWithTheSameTablesIndexesAndTriggers() async throws {
        let sqlite = try await withStore(.sqlite) { try await Self.layout($0, .sqlite) }
        let postgres = try await withStore(.postgres) { try await Self.layout($0, .postgres) }
        #expect(sqlite.columns == postgres.columns)
        #expect(sqlite.indexes == postgres.indexes)
        #expect(sqlite.triggers == postgres.triggers)
        #expect(sqlite.columns.contains("results.state") && sqlite.columns.contains("device_changes.generation"))
    }

    /// A store's tables (as `table.column`), its own indexes (not those its engine
    /// makes for keys) and its triggers, each sorted.
    struct Layout: Equatable {
        var columns: [String]
        var indexes: [String]
        var triggers: [String]
    }

    static func layout(_ store: some TestStore, _ kind: StoreKind) async throws -> Layout {
        func names(_ sql: String) async throws -> [String] {
            try await store.texts(sql).compactMap { $0.first ?? nil }.sorted()
        }
        switch kind {
        case .sqlite:
            return Layout(
                columns: try await names("""
                    SELECT m.name || '.' || p.name FROM sqlite_master m, pragma_table_info(m.name) p
                    WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'
                    """),
                indexes: try await names("""
                    SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_autoindex_%'
                    """),
                triggers: try await names("SELECT name FROM sqlite_master WHERE type = 'trigger'"))
        case .postgres:
            return Layout(
                columns: try await names("""
                    SELECT table_name || '.' || column_name FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'
                    """),
                indexes: try await names("""
                    SELECT indexname FROM pg_indexes
                    WHERE schemaname = current_schema() AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'
                    """),
                triggers: try await names("""
                    SELECT DISTINCT trigger_name::text FROM information_schema.triggers
                    WHERE trigger_schema = current_schema()
                    """))
        }
    }

    @Test(arguments: StoreKind.allCases)
    func aDatabaseFromANewerProgramIsRefused(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.execute(kind == .sqlite ? "PRAGMA user_version = 99"
                                    : "INSERT INTO schema_migrations (version, name) VALUES (99, 'from the future')")
            let error = await #expect(throws: StoreError.self) { try await store.migrate() }
            #expect(error?.description
                    == "the database is at schema version 99, newer than this program's \(Schema.steps.count)")
        }
    }

    /// A database made before schedule keys were per kind keeps every schedule as it
    /// was, and then a Live Activity's key no longer supersedes a notification's.
    @Test(arguments: StoreKind.allCases)
    func schedulesBeforeKeysPerKindUpgradeAsTheyWere(_ kind: StoreKind) async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let store: any TestStore
        switch kind {
        case .sqlite:
            let sqlite = try SQLiteStore(path: scratch.path("step18.db"))
            try await sqlite.migrate(through: 18)
            store = sqlite
        case .postgres:
            let postgres = try PostgresStore(url: try await suiteCluster().newDatabase())
            try await postgres.migrate(through: 18)
            store = postgres
        }
        func schedule(_ id: String, _ kind: String, key: String?, now: Int64) async throws -> String? {
            try await store.schedule(NewSchedule(id: id, kind: kind, appType: "staff", type: "reminder", scheduleKey: key,
                                                 request: Array(#"{"id":"\#(id)"}"#.utf8), sendAt: 9_000), now: now)
        }
        _ = try await schedule("n0", "notification", key: "event-4", now: 1)
        #expect(try await schedule("n1", "notification", key: "event-4", now: 2) == "n0")
        _ = try await schedule("la1", "live_activity", key: "event-5", now: 3)
        _ = try await schedule("n2", "notification", key: nil, now: 4)
        let columns = """
            id, kind, app_type, type, schedule_key, CAST(send_at AS TEXT), CAST(created_at AS TEXT), state, superseded_by,
            CAST(finished_at AS TEXT)
            """
        let before = try await store.texts("SELECT \(columns) FROM scheduled_notifications ORDER BY id")

        try await store.migrate()
        #expect(try await store.texts("SELECT \(columns) FROM scheduled_notifications ORDER BY id") == before)
        #expect(try await schedule("la2", "live_activity", key: "event-4", now: 5) == nil)
        #expect(try await store.scheduled(id: "n1")?.state == "scheduled")
        #expect(try await schedule("la3", "live_activity", key: "event-5", now: 6) == "la1")
        #expect(try await schedule("n3", "notification", key: "event-4", now: 7) == "n1")
        #expect(try await store.scheduled(id: "la2")?.state == "scheduled")
        if let postgres = store as? PostgresStore { await postgres.close() }
    }

    /// Every table the released schema had on both engines, with a row of each kind.
    static func rows(_ kind: StoreKind) -> [String] {
        let bytes = kind == .sqlite ? "x'7b7d'" : "'\\x7b7d'"
        let empty = kind == .sqlite ? "x''" : "''"
        return [
            """
            INSERT INTO devices (id, user_id, company_id, app_type, token, platform, environment, device_name,
                                 is_active, deactivated_reason, deactivated_at, registered_at, created_at, updated_at)
                VALUES (1, 'alice', 'acme', 'staff', 't1', 'ios', 'production', 'Phone', '1', NULL, NULL, 1, 1, 1),
                       (2, 'bob', 'acme', 'staff', 't2', 'ios', 'production', NULL, '1', NULL, NULL, 2, 2, 2),
                       (3, 'alice', NULL, 'staff', 't3', 'liveactivity', 'production', NULL, '1', NULL, NULL, 3, 3, 3),
                       (4, 'carol', NULL, 'staff', 't4', 'ios', 'production', NULL, '0', 'unregistered', 7, 4, 4, 7),
                       (5, 'dave', NULL, 'staff', 't5', 'liveactivity', 'production', NULL, '1', NULL, NULL, 5, 5, 5)
            """,
            """
            INSERT INTO preferences (user_id, app_type, key, value, text_value, updated_at)
                VALUES ('alice', 'staff', 'newEnquiry', '0', NULL, 1), ('alice', 'staff', 'timeZone', NULL, 'Europe/London', 1)
            """,
            """
            INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at)
                VALUES ('n1', 'order_created', 'order', 'o1', 'staff', 1), ('n2', 'order_created', 'order', 'o2', 'staff', 2)
            """,
            "INSERT INTO payloads (id, notification_id, bytes) VALUES (7, 'n1', \(bytes)), (8, 'n2', \(bytes))",
            // 1 and 2 sent (their answers per engine below), 3 pending, 4 held by quiet
            // hours, 5 leased by a worker that died, 6 batched into 4, 7 superseded by 4.
            """
            INSERT INTO deliveries (id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    push_type, created_at, payload_id, state, status, reason, apns_timestamp,
                                    attempts, finished_at, not_before, carried_by, batched)
                VALUES (1, 'n1', 'alice', 1, 't1', 'production', 'sent-ok', \(empty), 'alert', 1, 7,
                        'pending', NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                       (2, 'n1', 'bob', 2, 't2', 'production', 'sent-410', \(empty), 'alert', 1, 7,
                        'failed', 410, 'Unregistered', 19, 2, 21, NULL, NULL, NULL),
                       (3, 'n2', 'alice', 1, 't1', 'production', 'waiting', \(empty), 'alert', 2, 8,
                        'pending', NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL),
                       (4, 'n2', 'bob', 2, 't2', 'production', 'held', \(empty), 'alert', 2, 8,
                        'pending', NULL, NULL, NULL, 0, NULL, 1000, NULL, 2),
                       (5, 'n2', 'alice', 1, 't1', 'production', 'leased', \(empty), 'alert', 2, 8,
                        'pending', NULL, NULL, NULL, 1, NULL, NULL, NULL, NULL),
                       (6, 'n2', 'bob', 2, 't2', 'production', 'member', \(empty), 'alert', 2, 8,
                        'batched', NULL, NULL, NULL, 0, 9, NULL, 4, NULL),
                       (7, 'n2', 'bob', 2, 't2', 'production', 'replaced', \(empty), 'alert', 2, 8,
                        'superseded', NULL, NULL, NULL, 0, 9, NULL, 4, NULL)
            """,
            """
            INSERT INTO outbox (delivery_id, available_at, lease_until, claimed_by)
                VALUES (3, 10, NULL, NULL), (4, 1000, NULL, NULL), (5, 10, 100, 'gone')
            """,
            "INSERT INTO holds (device_id, kind, key, delivery_id, closes_at) VALUES (2, 'defer', 'quiet', 4, 1000)",
            """
            INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type)
                VALUES (3, 'update', 'act-A', 'Attrs'), (5, 'start', NULL, 'Attrs')
            """,
            "INSERT INTO live_activities (app_type, activity_id, user_id, created_at) VALUES ('staff', 'act-A', 'alice', 3)",
            """
            INSERT INTO channels (id, app_type, environment, entity_type, entity_id, channel_id, storage_policy,
                                  created_at, is_public, audience_company)
                VALUES (1, 'staff', 'production', 'match', 'm1', 'AAAA', 1, 1, '0', NULL)
            """,
            "INSERT INTO channel_users (channel, user_id) VALUES (1, 'alice')",
            """
            INSERT INTO broadcasts (id, app_type, environment, entity_type, entity_id, channel_id, payload, priority,
                                    expiration, state, status, attempts, created_at, finished_at, available_at)
                VALUES ('b1', 'staff', 'production', 'match', 'm1', 'AAAA', \(bytes), 10, 0, 'pending', NULL, 0, 1, NULL, 1),
                       ('b2', 'staff', 'production', 'match', 'm1', 'AAAA', \(bytes), 10, 0, 'delivered', 200, 1, 1, 3, 1)
            """,
        ]
    }

    /// The released SQLite kept new answers and last uses in their own tables; 2's
    /// answer is in its log row, as answers from before those tables are.
    static let sqliteOnlyRows = [
        """
        INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
            VALUES (1, 'delivered', 200, NULL, NULL, 1, 20)
        """,
        "INSERT INTO device_use (device_id, last_used_at) VALUES (1, 50)",
    ]

    /// The released PostgreSQL wrote every answer and last use over the rows.
    static let postgresOnlyRows = [
        "UPDATE deliveries SET state = 'delivered', status = 200, attempts = 1, finished_at = 20 WHERE id = 1",
        "UPDATE devices SET last_used_at = 50 WHERE id = 1",
        "SELECT setval('devices_id_seq', 5)", "SELECT setval('deliveries_id_seq', 7)",
        "SELECT setval('payloads_id_seq', 8)", "SELECT setval('channels_id_seq', 1)",
    ]

    static func check(_ store: some TestStore) async throws {
        // Every row of every table is still there (results: both answers, now in one place).
        for (table, count) in [("devices", 5), ("preferences", 2), ("notifications", 2), ("payloads", 2),
                               ("deliveries", 7), ("outbox", 3), ("holds", 1), ("live_activity_tokens", 2),
                               ("live_activities", 1), ("channels", 1), ("channel_users", 1), ("broadcasts", 2),
                               ("results", 2), ("device_use", 1), ("device_changes", 1)] as [(String, Int64)] {
            #expect(try await store.scalar("SELECT count(*) FROM \(table)") == count, "\(table)")
        }
        // One meaning on both: the store's own decisions in `deliveries.state`, APNs' answers in `results`.
        #expect(try await store.scalar("SELECT count(*) FROM deliveries WHERE state IN ('delivered', 'failed')") == 0)
        #expect(try await store.scalar("SELECT count(*) FROM devices WHERE last_used_at IS NOT NULL") == 0)

        // The log reads as before.
        let sent = try #require(try await store.notification(id: "n1"))
        #expect(sent.counts == ["delivered": 1, "failed": 1])
        #expect(sent.deliveries.map(\.apnsID) == ["sent-ok", "sent-410"])
        #expect(sent.deliveries.map(\.status) == [200, 410])
        #expect(sent.deliveries.map(\.finishedAt) == [20, 21])
        let failed = try #require(try await store.delivery(apnsID: "sent-410"))
        #expect(failed.reason == "Unregistered" && failed.timestamp == 19 && failed.attempts == 2)
        let waiting = try #require(try await store.notification(id: "n2"))
        #expect(waiting.counts == ["pending": 3, "batched": 1, "superseded": 1])
        let member = try #require(try await store.delivery(apnsID: "member"))
        #expect(member.state == "batched" && member.carriedBy == "held" && member.finishedAt == 9)
        #expect(try await store.delivery(apnsID: "held")?.notBefore == 1000)
        // Every notification an older program made is complete: none is a plan a
        // start would discard (see `FanOutPlans`).
        #expect(try await store.scalar("SELECT count(*) FROM notifications WHERE planning_until IS NULL") == 2)
        #expect(try await store.discardPlans(before: .max) == 0)

        // Devices, preferences, Live Activities, channels and broadcasts.
        let alices = try await store.devices(userID: "alice")
        #expect(alices.map(\.id) == [1] && alices.first?.lastUsedAt == 50 && alices.first?.deviceName == "Phone")
        #expect(try await store.preferences(userID: "alice", appType: "staff")
                == ["newEnquiry": false, "timeZone": "Europe/London"])
        #expect(try await store.liveActivityTokens(appType: "staff", .activity("act-A")).map(\.token) == ["t3"])
        #expect(try await store.liveActivityTokens(userID: "dave").map(\.kind) == [.start])
        let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
        #expect(try await store.channel(key, visibleTo: "alice", companyID: nil)?.channelID == "AAAA")
        #expect(try await store.channel(key, visibleTo: "bob", companyID: nil) == nil)
        #expect(try await store.pendingBroadcasts() == 1)
        #expect(try await store.broadcast(id: "b2")?.state == "delivered")

        // What was waiting still goes, each once, with its own apns-id and payload: the
        // pending one now, the dead worker's once its lease ends, the held one when due.
        let now = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000_000, now: 50)
        #expect(now.map(\.delivery.apnsID) == ["waiting"])
        #expect(now.first?.delivery.payload == Array("{}".utf8))
        let expired = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000_000, now: 100)
        #expect(expired.map(\.delivery.apnsID) == ["leased"])
        #expect(try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 999).isEmpty)
        let due = try await store.claim(worker: "w", limit: 10, leaseMillis: 1_000, now: 1000)
        #expect(due.map(\.delivery.apnsID) == ["held"])
        #expect(due.first?.batched == 2 && due.first?.delivery.payload == Array("{}".utf8))
        // A held delivery given back (the service's quiet hours moved) goes again with the same apns-id.
        try await store.release(worker: "w", deliveryIDs: due.map(\.id), availableAt: 2000, now: 1001)
        let released = try await store.claim(worker: "w2", limit: 10, leaseMillis: 1_000, now: 2000)
        #expect(released.map(\.delivery.apnsID) == ["held"])

        // Finishing after the upgrade writes the new way, and the log reads it alike.
        #expect(try await store.finish(worker: "w", now.map { delivered($0.id, status: 200, at: 60) }, now: 61) == 0)
        #expect(try await store.delivery(apnsID: "waiting")?.state == "delivered")
        #expect(try await store.devices(userID: "alice").first?.lastUsedAt == 61)
        #expect(try await store.notification(id: "n2")?.counts == ["pending": 2, "delivered": 1, "batched": 1,
                                                                    "superseded": 1])
        // Pruning keeps working over the moved answers: n1 is final, n2 is not.
        #expect(try await store.pruneLog(before: 10, limit: 10) == PruneResult(notifications: 1, deliveries: 2, broadcasts: 1))
        #expect(try await store.scalar("SELECT count(*) FROM results") == 1)
        #expect(try await store.pruneDevices(inactiveBefore: 8, limit: 10) == 1, "carol's token")
    }
}
