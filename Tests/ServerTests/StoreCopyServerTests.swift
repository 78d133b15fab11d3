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

    /// How long the held deliveries wait, at least (seconds): the SQLite server must
    /// stop before any is due, eight requests after their time starts to run (a tenth
    /// of a second on an idle machine, many times that beside the rest of the suite).
    static let holdSeconds = 15

    /// A server's SQLite file with held and pending deliveries, copied; two instances
    /// on the copy send each once, none before its time. Several processes are the
    /// point, so this is the release binary on the real time: batching windows of
    /// `holdSeconds`, and quiet hours that end at the first whole minute (their unit)
    /// at least that far ahead, so the test waits up to 75 s.
    @Test func aCopiedDatabaseServesTwoInstancesAndSendsEachHeldAndPendingDeliveryOnce() async throws {
        let t0 = Instants.now
        let tokens = Harness.tokens(4, seed: 2100)

        // 1. A server on SQLite, whose deliveries are all held.
        let before = try Harness.mock(sandbox: false)
        defer { before.stop() }
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = Held.apps(batchingWindow: Self.holdSeconds)
        let sqliteServer = ServerProcess(sandbox: nil, production: before, options: options)
        try await sqliteServer.start()
        await Held.user(sqliteServer, "ny", token: tokens[0], app: "travel")
        await Held.user(sqliteServer, "tech", token: tokens[1], app: "field")
        await BackendAPITests.register(sqliteServer, user: "p1", token: tokens[2])
        await BackendAPITests.register(sqliteServer, user: "p2", token: tokens[3])

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

        // The held deliveries last, as their time runs from here: the user's quiet hours
        // (in a zone without daylight saving) end at a whole minute.
        let hold = Int64(Self.holdSeconds) * 1000
        let posted = Instants.now
        let quietEnd = Instants.wholeMinute(atLeast: hold)
        await Held.prefer(sqliteServer, "ny", app: "travel", Instants.quietHours(endingAt: quietEnd, in: "America/Bogota"))
        func message(_ body: String, _ extra: String = "") -> String {
            #""type":"message","app_type":"travel","user_ids":["ny"],"alert":{"title":"Trip","body":"\#(body)"},"sound":"default"\#(extra)"#
        }
        func update(_ job: String, _ body: String) -> String {
            #""type":"taskUpdate","entity_type":"task","entity_id":"\#(job)","entity_title":"Job \#(job)","app_type":"field","user_ids":["tech"],"alert":{"title":"Job","body":"\#(body)"}"#
        }
        // One request each, and the server stopped before any is due; what they made is
        // read from the file then.
        let deferredID = try await Held.post(sqliteServer, message("held"))
        let supersededID = try await Held.post(sqliteServer, message("v1", #","collapse_id":"trip-42""#))
        let replacingID = try await Held.post(sqliteServer, message("v2", #","collapse_id":"trip-42""#))
        var updateIDs: [String] = []
        for i in 0..<3 {
            updateIDs.append(try await Held.post(sqliteServer, update("job-1", "update \(i)")))
        }
        updateIDs.append(try await Held.post(sqliteServer, update("job-2", "other job")))
        #expect(await sqliteServer.stop() == 0)
        let stopped = Instants.now
        #expect(before.recordedRequests().isEmpty, "nothing was due on SQLite")

        // The deliveries as the store keeps them (what the log's answers are made of).
        func first(_ id: String) async throws -> DeliveryView {
            try #require(try await sqlite.notification(id: id, limit: 10, after: nil)?.deliveries.first, "\(id)")
        }
        let deferred = try await first(deferredID), superseded = try await first(supersededID)
        let replacing = try await first(replacingID)
        var members: [DeliveryView] = []
        for id in updateIDs { members.append(try await first(id)) }
        #expect(superseded.state == "superseded" && superseded.carriedBy == replacing.apnsID, "\(superseded)")
        #expect(members.allSatisfy { $0.state == "batched" }, "\(members)")
        let carriers = Set(members.compactMap(\.carriedBy))
        #expect(carriers.count == 2, "one window per job")
        // Held: each pending until its time, in the outbox until then.
        let held = [deferred.apnsID, replacing.apnsID] + carriers.sorted()
        var views: [String: DeliveryView] = [:]
        var heldUntil: [String: Int64] = [:]
        for apnsID in held {
            let view = try #require(try await sqlite.delivery(apnsID: apnsID))
            #expect(view.state == "pending", "\(view)")
            views[apnsID] = view
            heldUntil[apnsID] = try #require(view.notBefore, "\(view)")
        }
        // Settled: the members and the superseded one, which never change again.
        let settled = members.map(\.apnsID) + [superseded.apnsID]
        for apnsID in settled { views[apnsID] = try #require(try await sqlite.delivery(apnsID: apnsID)) }
        let heldPlaces = try await sqlite.outboxPlaces(apnsIDs: held)
        #expect(held.allSatisfy { heldPlaces[$0]?.availableAt == heldUntil[$0] }, "\(heldPlaces)")
        let quietPreferences = try await sqlite.preferences(userID: "ny", appType: "travel")
        #expect(heldUntil[deferred.apnsID] == quietEnd && heldUntil[replacing.apnsID] == quietEnd)
        for carrier in carriers {
            let until = try #require(heldUntil[carrier])
            #expect(until >= posted + hold && until <= stopped + hold, "a window closes \(hold) ms after it opened")
        }
        let firstDue = try #require(heldUntil.values.min())
        #expect(stopped < firstDue, "stopped at \(Instants.iso(stopped)), before any was due (\(Instants.iso(firstDue)))")

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
            // The held and settled deliveries as they were, read before any instance could
            // send one.
            let copy = PostgresStore(try PostgresStore.Configuration(url: url))
            for apnsID in held + settled { #expect(try await copy.delivery(apnsID: apnsID) == views[apnsID], "\(apnsID)") }
            #expect(try await copy.outboxPlaces(apnsIDs: held) == heldPlaces)
            #expect(try await copy.preferences(userID: "ny", appType: "travel") == quietPreferences)
            await copy.close()

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
        let up = Instants.now
        do {
            // The pending ones go now; the held ones at their time, not before (and soon
            // after, or after the instances started if that was later).
            for apnsID in pending { try await Held.wait(instances[0], apnsID) }
            for m in members {
                let row = await Held.delivery(instances[1], m.apnsID)
                #expect(row["state"] as? String == "batched" && row["carried_by"] as? String == m.carriedBy, "\(row)")
            }
            let replaced = await Held.delivery(instances[1], superseded.apnsID)
            #expect(replaced["state"] as? String == "superseded" && replaced["carried_by"] as? String == replacing.apnsID)
            #expect(try await Self.logPages(instances[1], "bulk") == logBefore, "the log reads the same")
            for apnsID in held { try await Held.wait(instances[1], apnsID, timeout: 120) }
            for apnsID in held {
                let until = try #require(heldUntil[apnsID])
                let sent = try Held.sentAt(mock, apnsID)
                #expect(sent >= until - Instants.skew && sent <= max(until, up) + Instants.lateness,
                        "\(apnsID) sent at \(Instants.iso(sent)), held until \(Instants.iso(until))")
            }

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
