import APNsMock
import Foundation
@testable import Store
import Testing
import TestSupport

/// Moving from SQLite to PostgreSQL with the real binary: a server's SQLite file,
/// with a long log and deliveries held by quiet hours and batching windows and
/// pending ones, is copied by `apns-server store copy`; two instances then serve
/// the PostgreSQL database against one mock.
@Suite(.serialized) struct StoreCopyServerTests {
    /// Log rows in the copied database: 100k under APNS_SOAK=1 (the issue's figure),
    /// fewer otherwise to keep the suite quick; the code path is the same.
    static let logRows = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1" ? 100_000 : 10_000

    /// Every page of a notification's log, as the API answers it.
    static func logPages(_ server: ServerProcess, _ id: String) async throws -> [String] {
        var pages: [String] = []
        var after: Int?
        repeat {
            let r = await server.backend("GET", "/v1/notifications/\(id)?limit=5000" + (after.map { "&after=\($0)" } ?? ""))
            #expect(r.status == 200, "\(r.body.prefix(300))")
            pages.append(r.body)
            after = (r.json["next"] as? String).flatMap(Int.init)
        } while after != nil
        return pages
    }

    @Test func aCopiedDatabaseServesTwoInstancesAndSendsEachHeldAndPendingDeliveryOnce() async throws {
        let clock = TestClock(at: "2026-03-08T04:00:00Z")  // 23:00 in New York: quiet hours
        let t0 = clock.now
        let quiet = #"{"quietHoursEnabled":true,"quietHoursStart":"22:00","quietHoursEnd":"08:00","timeZone":"America/New_York"}"#
        let tokens = Harness.tokens(4, seed: 2100)

        // 1. A server on SQLite, whose deliveries are all held.
        let before = try Harness.mock(sandbox: false)
        defer { before.stop() }
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = Held.apps
        options.testClockFile = clock.path
        let sqliteServer = ServerProcess(sandbox: nil, production: before, options: options)
        try await sqliteServer.start()
        await Held.user(sqliteServer, "ny", token: tokens[0], app: "travel", preferences: quiet)
        await Held.user(sqliteServer, "tech", token: tokens[1], app: "field")
        await BackendAPITests.register(sqliteServer, user: "p1", token: tokens[2])
        await BackendAPITests.register(sqliteServer, user: "p2", token: tokens[3])
        func message(_ body: String, _ extra: String = "") -> String {
            #""type":"message","app_type":"travel","user_ids":["ny"],"alert":{"title":"Trip","body":"\#(body)"},"sound":"default"\#(extra)"#
        }
        func update(_ job: String, _ body: String) -> String {
            #""type":"taskUpdate","entity_type":"task","entity_id":"\#(job)","entity_title":"Job \#(job)","app_type":"field","user_ids":["tech"],"alert":{"title":"Job","body":"\#(body)"}"#
        }
        let deferred = try await Held.notify(sqliteServer, message("held"))
        let superseded = try await Held.notify(sqliteServer, message("v1", #","collapse_id":"trip-42""#))
        let replacing = try await Held.notify(sqliteServer, message("v2", #","collapse_id":"trip-42""#))
        var members: [(apnsID: String, id: String)] = []
        for i in 0..<3 {
            clock.set(t0 + Int64(i) * 1_000)
            members.append(try await Held.notify(sqliteServer, update("job-1", "update \(i)")))
        }
        members.append(try await Held.notify(sqliteServer, update("job-2", "other job")))
        var carriers: Set<String> = []
        for m in members {
            carriers.insert(try #require(await Held.delivery(sqliteServer, m.apnsID)["carried_by"] as? String))
        }
        #expect(carriers.count == 2, "one window per job")
        let held = [deferred.apnsID, replacing.apnsID] + carriers.sorted()
        for apnsID in held {
            #expect(await Held.delivery(sqliteServer, apnsID)["state"] as? String == "pending")
        }
        #expect(await Held.delivery(sqliteServer, superseded.apnsID)["state"] as? String == "superseded")

        // A long, finished log, written straight into the file (the API would take minutes).
        let sqlite = try sqliteServer.store()
        try await sqlite.execute("""
            INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at)
                VALUES ('bulk', 'order_created', 'order', 'o1', 'staff', \(t0 - 3_600_000));
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(Self.logRows))
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    push_type, state, attempts, created_at)
                SELECT 'bulk', 'p' || (i % 2 + 1), 1, '\(tokens[2])', 'production',
                       printf('%08x-0000-4000-8000-%012x', i, i), X'7B7D', 'alert', 'pending', 1, \(t0 - 3_600_000)
                FROM n;
            INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
                SELECT id, CASE WHEN id % 10 = 0 THEN 'failed' ELSE 'delivered' END, CASE WHEN id % 10 = 0 THEN 410 ELSE 200 END,
                       CASE WHEN id % 10 = 0 THEN 'Unregistered' END, \(t0 - 3_000_000), 1, \(t0 - 3_000_000)
                FROM deliveries WHERE notification_id = 'bulk';
            """)
        let logBefore = try await Self.logPages(sqliteServer, "bulk")
        #expect(logBefore.count >= Self.logRows / 5_000, "the whole log, a page at a time")
        var heldBefore: [String: String] = [:]
        for apnsID in held + members.map(\.apnsID) + [superseded.apnsID] {
            heldBefore[apnsID] = await sqliteServer.backend("GET", "/v1/deliveries?apns_id=\(apnsID)").body
        }
        #expect(await sqliteServer.stop() == 0)
        #expect(before.recordedRequests().isEmpty, "nothing was due on SQLite")

        // Pending, due at once, left behind by a server that stopped before sending them.
        let p1 = try #require(try await sqlite.scalar("SELECT id FROM devices WHERE token = '\(tokens[2])'"))
        let p2 = try #require(try await sqlite.scalar("SELECT id FROM devices WHERE token = '\(tokens[3])'"))
        let pending = (0..<6).map { _ in UUID().uuidString.lowercased() }
        try await sqlite.enqueue(NewNotification(id: "pending", type: "order_created", entityType: "order", entityID: "o2",
                                                 appType: "staff"),
                                 pending.enumerated().map { i, apnsID in
                                     let (user, device, token) = i % 2 == 0 ? ("p1", p1, tokens[2]) : ("p2", p2, tokens[3])
                                     return NewDelivery(userID: user, deviceID: device, token: token, environment: "production",
                                                        apnsID: apnsID, payload: Array(#"{"aps":{"alert":"p\#(i)"}}"#.utf8))
                                 }, now: t0)
        await sqlite.close()

        // 2. The copy, with the real command.
        let cluster = try await PostgresCluster.shared()
        let instances: [ServerProcess]
        let mock = try Harness.mock(sandbox: false)
        do {
            let url = try await cluster.newDatabase()
            let copied = await run(Harness.binary, ["store", "copy", "--from", "sqlite:\(sqliteServer.databasePath)",
                                                    "--to", url], timeout: 600)
            #expect(copied.status == 0, "\(copied.stderr.suffix(2000))")
            #expect(copied.stderr.contains("copy: deliveries "), "progress lines")
            #expect(copied.stderr.contains("copy: check: every table's counts match"), "\(copied.stderr.suffix(2000))")

            // 3. Two instances on PostgreSQL, one mock.
            options.database = url
            instances = [ServerProcess(sandbox: nil, production: mock, options: options),
                         ServerProcess(sandbox: nil, production: mock, options: options)]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for server in instances { group.addTask { try await server.start() } }
                try await group.waitForAll()
            }
        } catch {
            mock.stop()
            throw error
        }
        do {
            // The pending ones go now; the held ones wait for their time.
            for apnsID in pending { try await Held.wait(instances[0], apnsID) }
            for apnsID in held {
                #expect(await Held.delivery(instances[1], apnsID)["state"] as? String == "pending")
            }
            for (apnsID, body) in heldBefore {
                #expect(await instances[1].backend("GET", "/v1/deliveries?apns_id=\(apnsID)").body == body, "\(apnsID)")
            }
            #expect(try await Self.logPages(instances[1], "bulk") == logBefore, "the log reads the same")

            // 08:00 in New York: quiet hours and both windows are over.
            clock.set("2026-03-08T12:00:00Z")
            for apnsID in held { try await Held.wait(instances[1], apnsID) }

            let sent = mock.recordedRequests().compactMap { $0.header("apns-id")?.lowercased() }
            let expected = Set((pending + held).map { $0.lowercased() })
            #expect(Set(sent) == expected, "every pending and held delivery went out, and nothing else")
            #expect(sent.count == expected.count, "each once: \(sent.count) sends for \(expected.count) deliveries")
            for apnsID in expected { #expect(sent.filter { $0 == apnsID }.count == 1, "\(apnsID) went out once") }
        } catch {
            for server in instances { print(server.stderr) }
            for server in instances { _ = await server.stop() }
            mock.stop()
            throw error
        }
        for server in instances { #expect(await server.stop() == 0) }
        mock.stop()
    }

    /// Bad input: exit 2, one line on stderr, and the target as it was.
    @Test func badInputIsOneLineAndExitTwoWithNothingWritten() async throws {
        let scratch = Scratch()
        let cluster = try await PostgresCluster.shared()
        let empty = try await cluster.newDatabase()
        let full = try await cluster.newDatabase()
        let store = PostgresStore(try PostgresStore.Configuration(url: full))
        try await store.migrate()
        _ = try await store.register(DeviceRegistration(userID: "u", token: String(repeating: "ab", count: 32), platform: "ios",
                                                    appType: "staff"), now: 1)
        let source = try SQLiteStore(path: scratch.path("apns.db"))
        try await source.migrate()
        await source.close()
        let random = scratch.file("random.db", Data((0..<8192).map { UInt8(($0 * 7) % 256) }))
        let plain = try SQLiteStore(path: scratch.path("plain.db"))
        try await plain.execute("CREATE TABLE t (x)")
        await plain.close()
        let older = try SQLiteStore(path: scratch.path("older.db"))
        try await older.migrate(through: Schema.steps.count - 1)
        await older.close()
        let newer = try SQLiteStore(path: scratch.path("newer.db"))
        try await newer.migrate()
        try await newer.execute("PRAGMA user_version = \(Schema.steps.count + 1)")
        await newer.close()
        let port = freePort()

        let cases: [(from: String, to: String, says: String)] = [
            (scratch.path("apns.db"), "postgres://u@127.0.0.1:\(port)/db?sslmode=disable", "cannot reach PostgreSQL at 127.0.0.1:\(port)"),
            (scratch.path("apns.db"), full, "is not empty (table devices has 1 rows)"),
            (random, empty, "is not an apns-server database"),
            (scratch.path("plain.db"), empty, "is not an apns-server database (it has no table"),
            (scratch.path("newer.db"), empty, "newer than this program's \(Schema.steps.count)"),
            (scratch.path("older.db"), empty, "start this apns-server once on it"),
        ]
        for c in cases {
            let r = await run(Harness.binary, ["store", "copy", "--from", "sqlite:\(c.from)", "--to", c.to])
            #expect(r.status == 2, "\(c.says): \(r.stderr)")
            #expect(r.stderr.hasPrefix("apns-server: store copy: ") && r.stderr.contains(c.says), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
        }
        // Neither target changed: the empty one has no table, the full one its one row.
        #expect(try await store.scalar("SELECT count(*) FROM devices") == 1)
        #expect(try await store.scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'store_copy_progress'") == 0)
        await store.close()
        let untouched = PostgresStore(try PostgresStore.Configuration(url: empty))
        #expect(try await untouched.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == 0)
        await untouched.close()
    }

    /// The command killed (SIGKILL) after its first batch of deliveries, then run
    /// again: the second run resumes the copy on the target and ends with equal
    /// counts; the target's unique apns-ids and keys leave no room for a duplicate.
    @Test func aKilledCopyResumesWhenRunAgain() async throws {
        let scratch = Scratch()
        let source = try SQLiteStore(path: scratch.path("apns.db"))
        try await source.migrate()
        try await source.execute("""
            INSERT INTO notifications (id, type, entity_type, entity_id, app_type, created_at)
                VALUES ('bulk', 'order_created', 'order', 'o1', 'staff', 1);
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    push_type, state, attempts, created_at)
                SELECT 'bulk', 'u', 1, 't', 'production', printf('%08x-0000-4000-8000-%012x', i, i), X'7B7D',
                       'alert', 'pending', 0, 1
                FROM n;
            INSERT INTO outbox (delivery_id, available_at) SELECT id, 1 FROM deliveries;
            """)
        await source.close()
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.newDatabase()
        let arguments = ["store", "copy", "--from", "sqlite:\(scratch.path("apns.db"))", "--to", url, "--batch", "500"]
        let p = ChildProcess()
        p.executableURL = URL(fileURLWithPath: Harness.binary)
        p.arguments = arguments
        let errPath = scratch.file("copy.err", "")
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let end = Date().addingTimeInterval(120)
        while !((try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "").contains("copy: deliveries 500/") {
            guard p.isRunning, Date() < end else { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        kill(p.processIdentifier, SIGKILL)
        await offPool { p.waitUntilExit() }
        #expect(p.terminationReason == .uncaughtSignal, "killed mid-copy: \((try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")")

        let again = await run(Harness.binary, arguments, timeout: 600)
        #expect(again.status == 0, "\(again.stderr.suffix(2000))")
        #expect(again.stderr.contains("copy: resuming the copy recorded on the target"))
        #expect(!again.stderr.contains("copy: deliveries 500/20000"), "the first batch is not copied again")
        #expect(again.stderr.contains("copy: check: every table's counts match"))
        let target = PostgresStore(try PostgresStore.Configuration(url: url))
        #expect(try await target.scalar("SELECT count(*) FROM deliveries") == 20_000)
        #expect(try await target.scalar("SELECT count(DISTINCT apns_id) FROM deliveries") == 20_000)
        #expect(try await target.scalar("SELECT count(*) FROM outbox") == 20_000)
        await target.close()
    }

    /// A database whose owner signs in with `password` (the cluster's one such role);
    /// its URL as that user, without the password.
    static func passwordDatabase(_ cluster: PostgresCluster, password: String) async throws -> String {
        let url = try await cluster.newDatabase()
        let name = try #require(url.split(separator: "/").last?.split(separator: "?").first.map(String.init))
        let admin = PostgresStore(try PostgresStore.Configuration(url: url))
        let role = PostgresCluster.passwordUser
        do {
            try await admin.execute("DO $$ BEGIN CREATE ROLE \(role) LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
            try await admin.execute("ALTER ROLE \(role) PASSWORD '\(password)'")
            try await admin.execute("ALTER DATABASE \(name) OWNER TO \(role)")
        } catch {
            await admin.close()
            throw error
        }
        await admin.close()
        return url.replacingOccurrences(of: "postgres://\(cluster.user)@", with: "postgres://\(role)@")
    }

    /// The password need not be in the command line, where `ps` shows it: the first
    /// line of `--password-file`, or `PGPASSWORD`, for a URL without one. A file that
    /// cannot be read, or a password given twice, is one line and exit 2.
    @Test func thePasswordComesFromAFileOrPGPASSWORD() async throws {
        let scratch = Scratch()
        let source = try SQLiteStore(path: scratch.path("apns.db"))
        try await source.migrate()
        _ = try await source.register(DeviceRegistration(userID: "u", token: String(repeating: "ab", count: 32),
                                                         platform: "ios", appType: "staff"), now: 1)
        await source.close()
        let password = "pw-\(UUID().uuidString)"
        let cluster = try await PostgresCluster.shared()
        let from = "sqlite:\(scratch.path("apns.db"))"
        var environment = ProcessInfo.processInfo.environment
        environment["PGPASSWORD"] = nil

        let none = try await Self.passwordDatabase(cluster, password: password)
        let withoutOne = await run(Harness.binary, ["store", "copy", "--from", from, "--to", none], environment: environment)
        #expect(withoutOne.status == 2 && withoutOne.stderr.contains("asks for a password and the URL has none"),
                "\(withoutOne.stderr)")

        var withVariable = environment
        withVariable["PGPASSWORD"] = password
        let viaVariable = await run(Harness.binary, ["store", "copy", "--from", from, "--to", none], environment: withVariable)
        #expect(viaVariable.status == 0, "\(viaVariable.stderr)")
        #expect(viaVariable.stderr.contains("copy: check: every table's counts match"))

        let file = scratch.file("password", password + "\n")
        let other = try await Self.passwordDatabase(cluster, password: password)
        let viaFile = await run(Harness.binary, ["store", "copy", "--from", from, "--to", other, "--password-file", file],
                                environment: environment)
        #expect(viaFile.status == 0, "\(viaFile.stderr)")
        #expect(viaFile.stderr.contains("copy: check: every table's counts match"))
        // The file wins over the environment.
        let wrong = scratch.file("wrong", "not-it\n")
        let third = try await Self.passwordDatabase(cluster, password: password)
        let wrongFile = await run(Harness.binary, ["store", "copy", "--from", from, "--to", third, "--password-file", wrong],
                                  environment: withVariable)
        #expect(wrongFile.status == 2 && wrongFile.stderr.contains("password authentication failed"), "\(wrongFile.stderr)")

        let inURL = other.replacingOccurrences(of: "\(PostgresCluster.passwordUser)@",
                                               with: "\(PostgresCluster.passwordUser):\(password)@")
        for (arguments, says) in [(["--to", third, "--password-file", scratch.path("missing")],
                                   "cannot read --password-file \(scratch.path("missing")): no such file or directory"),
                                  (["--to", third, "--password-file", scratch.file("empty", "")], "is empty"),
                                  (["--to", inURL, "--password-file", file], "give it once")] {
            let r = await run(Harness.binary, ["store", "copy", "--from", from] + arguments, environment: environment)
            #expect(r.status == 2 && r.stderr.hasPrefix("apns-server: store copy: ") && r.stderr.contains(says), "\(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "one line: \(r.stderr)")
            #expect(!r.stderr.contains(password), "the password is never shown")
        }
        let help = await run(Harness.binary, ["store", "copy", "--help"])
        #expect(help.stdout.contains("--password-file") && help.stdout.contains("PGPASSWORD"), "\(help.stdout)")
    }

    /// Where a re-run cannot get further, the command does not say to run it again
    /// but what to do instead.
    @Test func aCopyThatARerunCannotFinishSaysWhatToDoInstead() async throws {
        let scratch = Scratch()
        let source = try SQLiteStore(path: scratch.path("apns.db"))
        try await source.migrate()
        let token = String(repeating: "ab", count: 32)
        _ = try await source.register(DeviceRegistration(userID: "u", token: token, platform: "ios", appType: "staff"), now: 1)
        await source.close()
        let cluster = try await PostgresCluster.shared()
        let from = "sqlite:\(scratch.path("apns.db"))"

        // A target a newer program made.
        let newer = try await cluster.newDatabase()
        let store = PostgresStore(try PostgresStore.Configuration(url: newer))
        try await store.migrate()
        try await store.execute("INSERT INTO schema_migrations (version, name) VALUES (\(Schema.steps.count + 1), 'newer')")
        let refused = await run(Harness.binary, ["store", "copy", "--from", from, "--to", newer, "--into-non-empty"])
        #expect(refused.status == 2, "\(refused.stderr)")
        #expect(refused.stderr.contains("copy with the apns-server release that made it"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("run it again"), "\(refused.stderr)")
        await store.close()

        // A target whose own rows conflict with the source's: device 2 has the source's token.
        let conflicting = try await cluster.newDatabase()
        let target = PostgresStore(try PostgresStore.Configuration(url: conflicting))
        try await target.migrate()
        for (user, t) in [("x", String(repeating: "cd", count: 32)), ("y", token)] {
            _ = try await target.register(DeviceRegistration(userID: user, token: t, platform: "ios", appType: "staff"), now: 1)
        }
        let stopped = await run(Harness.binary, ["store", "copy", "--from", from, "--to", conflicting, "--into-non-empty"])
        #expect(stopped.status == 1, "\(stopped.stderr)")
        #expect(stopped.stderr.contains("apns-server: store copy stopped: ") && stopped.stderr.contains("duplicate key"),
                "\(stopped.stderr)")
        #expect(stopped.stderr.contains("remove them from the target, or copy into a new empty database"), "\(stopped.stderr)")
        #expect(!stopped.stderr.contains("run it again"), "\(stopped.stderr)")
        await target.close()
    }
}
