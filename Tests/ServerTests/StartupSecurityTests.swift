import Foundation
import Synchronization
import Testing
import TestSupport
@testable import Service
@testable import ServiceCore
@testable import Store

/// What an operator's files and logs show: the SQLite database and its WAL/SHM are
/// owner-only; a key, API-key or secret file others can read is warned of at start;
/// a database URL's password is never printed, however misspelled the URL;
/// `sqlite_synchronous: full` makes every commit survive power loss; and a database
/// locked by another process answers 503 with Retry-After, not 500.
@Suite struct StartupSecurityTests {
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    /// Registers one device (a write: the WAL and SHM exist after it).
    static func write(_ server: ServerProcess, seed: Int) async {
        let r = await server.request("POST", "/api/user/device-token",
            body: #"{"deviceToken":"\#(Harness.tokens(1, seed: seed)[0])","platform":"ios","appType":"staff"}"#,
            bearer: Harness.jwt(sub: "ana"))
        #expect(r.status == 200, "\(r.body)")
    }

    @Test func theDatabaseAndItsWALAndSHMAreOwnerOnly() async throws {
        // A new file, and one an older version left readable to all.
        for existing in [false, true] {
            let server = ServerProcess(sandbox: nil, production: nil)
            let db = server.databasePath
            if existing {
                try FileManager.default.createDirectory(atPath: server.scratch.path("var"), withIntermediateDirectories: true)
                for file in [db, db + "-wal", db + "-shm"] {
                    _ = FileManager.default.createFile(atPath: file, contents: nil)
                    chmod(file, 0o644)
                }
            }
            try await server.start()
            await Self.write(server, seed: existing ? 81 : 82)
            for file in [db, db + "-wal", db + "-shm"] {
                #expect(Self.mode(file) == 0o600, "\(existing ? "existing" : "new"): \(file) is \(String(Self.mode(file) ?? 0, radix: 8))")
            }
            await server.stop()
        }
    }

    @Test func keyAndSecretFilesOthersCanReadAreWarnedOfAtStart() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let key = server.scratch.file("AuthKey.p8", try Data(contentsOf: URL(fileURLWithPath: Harness.pki.keyPath)))
        let apiKeys = server.scratch.path("api-keys"), secret = server.scratch.path("user-jwt.secret")
        chmod(key, 0o640)
        chmod(apiKeys, 0o644)
        chmod(secret, 0o604)
        var text = try String(contentsOfFile: server.configPath, encoding: .utf8)
        text = text.replacingOccurrences(of: "key: \(Harness.pki.keyPath)", with: "key: AuthKey.p8")
        try text.write(toFile: server.configPath, atomically: true, encoding: .utf8)
        try await server.start()
        #expect(server.isRunning, "a warning, not a failure")
        await server.stop()
        let log = server.stderr
        for (path, mode) in [(apiKeys, "644"), (secret, "604"), (key, "640")] {
            let line = "\(path) is readable by group or others (mode \(mode)); chmod 600 it"
            #expect(log.contains(line), "\(line) in \(log)")
        }
        #expect(log.components(separatedBy: "readable by group or others").count - 1 == 3, "the key once, though two apps use it: \(log)")
        #expect(!log.contains(Harness.jwtSecret) && !log.contains(Harness.apiKey))

        // Owner-only (the harness's files): not a word.
        let quiet = ServerProcess(sandbox: nil, production: nil)
        try await quiet.start()
        await quiet.stop()
        #expect(!quiet.stderr.contains("readable by group or others"), "\(quiet.stderr)")
    }

    /// `postgres:user:pw@…` or `postgres//…` fell through to "database must be
    /// sqlite:PATH or postgres://…, not '<the whole value>'", password included.
    @Test func aMisspelledDatabaseURLNeverPrintsItsPassword() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let shapes: [(String, String)] = [
            ("postgres:apns:s3cret@db:5432/push", "'postgres:…@db:5432/push'"),
            ("postgres//apns:s3cret@db/push", "'…@db/push'"),
            ("postgres:/apns:s3cret@db/push", "'postgres:/…@db/push'"),
            ("postgress://apns:s3cret@db/push", "'postgress://…@db/push'"),
            ("postgres:apns:s3cret", "'postgres:…'"),
            ("apns:s3cret@db/push", "'apns:…@db/push'"),
            ("postgres:://apns:s3cret@@db/push", "'postgres:…@db/push'"),
            (" postgres://apns:s3cret@db/push", "'…@db/push'"),
        ]
        for (url, quoted) in shapes {
            for viaEnvironment in [false, true] {
                let r: ProcessResult
                if viaEnvironment {
                    r = await ConfigTests.run(["--config", server.configPath], environment: ["APNS_SERVER_DATABASE": url])
                } else {
                    let config = try ConfigTests.config(server, [("database: sqlite:var/apns.db", "database: \"\(url)\"")])
                    r = await ConfigTests.run(["--config", config])
                }
                #expect(r.status == 2, "\(url): \(r.stderr)")
                #expect(r.stderr.split(separator: "\n").count == 1, "\(url): one line: \(r.stderr)")
                #expect(!r.stderr.contains("s3cret"), "\(url): \(r.stderr)")
                #expect(r.stderr.contains("not \(quoted)"), "\(url): \(r.stderr)")
            }
        }
        // postgres:// URLs go to the URL's own parser, which never quotes a password either.
        for url in ["postgres://apns:s3cret@db:54x/push", "postgres://apns:s3cret@db", "postgres://apns:s3cret@db/push?sslmode=s3cret2",
                    "postgres://apns:s3cret/push", "postgresql://apns:s3cret@db/push?password=s3cret"] {
            let r = await ConfigTests.run(["--config", server.configPath], environment: ["APNS_SERVER_DATABASE": url])
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1, "\(url): \(r.stderr)")
            #expect(!r.stderr.contains("s3cret\"") && !r.stderr.contains(":s3cret"), "\(url): \(r.stderr)")
        }
    }

    /// PostgreSQL's URL without `sslmode` meant `prefer`: plain text, silently, from a
    /// server that offers no TLS. Now it is `require`: exit 2 and one line saying how
    /// to ask for plain text; `sslmode=disable` asks, and the server starts.
    @Test func aPostgreSQLWithoutTLSIsRefusedUnlessTheURLSaysDisable() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.newDatabase()
        let withoutMode = String(url.prefix { $0 != "?" })
        #expect(url.contains("?sslmode=disable&"))
        var options = ServerProcess.Options()
        options.database = withoutMode
        let server = ServerProcess(sandbox: nil, production: nil, options: options)
        let r = await ConfigTests.run(["--config", server.configPath])
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr == "apns-server: database \(withoutMode): migrate: PostgreSQL at 127.0.0.1:\(cluster.port) does not offer TLS (sslmode=require; sslmode=disable in the URL connects without it)\n")
        // --check-config connects as the start does, and says the same.
        let checked = await ConfigTests.run(["--check-config", "--config", server.configPath])
        #expect(checked.status == 2 && checked.stderr == r.stderr, "\(checked.stderr)")

        options.database = url
        let plain = ServerProcess(sandbox: nil, production: nil, options: options)
        let ready = await ConfigTests.run(["--check-config", "--config", plain.configPath])
        #expect(ready.status == 0, "\(ready.stderr)")
        try await plain.start()
        #expect(await plain.backend("GET", "/v1/deliveries?apns_id=x").status == 404)
        await plain.stop()
    }

    @Test func sqliteSynchronousFullIsOneFsyncPerCommit() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        func synchronous(_ line: String?) async throws -> Int? {
            var replace: [(String, String)] = []
            if let line { replace.append(("log_level: warning", "log_level: warning\n\(line)")) }
            let path = try ConfigTests.config(server, replace)
            let config = try ServerConfig.load(path: path, environment: [:])
            let store = try #require(try APNsServer.openStore(config.database) as? SQLiteStore)
            // The writer's setting: the only connection that commits.
            return try await store.writerScalar("PRAGMA synchronous").map(Int.init)
        }
        #expect(try await synchronous(nil) == 1, "NORMAL unless asked")
        #expect(try await synchronous("sqlite_synchronous: normal") == 1)
        #expect(try await synchronous("sqlite_synchronous: full") == 2)
        let bad = try ConfigTests.config(server, [("log_level: warning", "log_level: warning\nsqlite_synchronous: extra")])
        let r = await ConfigTests.run(["--config", bad])
        #expect(r.status == 2 && r.stderr == "apns-server: config: sqlite_synchronous must be normal or full, not 'extra'\n", "\(r.stderr)")
    }

    /// Another process holds SQLite's write lock past the busy timeout: a 503 the
    /// client may retry, where it was a 500 after many seconds; once the lock is
    /// let go, the same request succeeds.
    @Test func aLockedDatabaseIsA503WithRetryAfter() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        await Self.write(server, seed: 83)

        let holder = try server.store()
        let held = Flag(), released = Flag()
        let holding = Task { try await holder.holdWriteLock(held: { held.set() }, until: { released.isSet }) }
        while !held.isSet { try await Task.sleep(for: .milliseconds(10)) }

        let body = #"{"deviceToken":"\#(Harness.tokens(1, seed: 84)[0])","platform":"ios","appType":"staff"}"#
        let busy = await server.request("POST", "/api/user/device-token", body: body, bearer: Harness.jwt(sub: "bo"))
        #expect(busy.status == 503, "\(busy.status) \(busy.body)")
        #expect(busy.headers.first { $0.0 == "retry-after" }?.1 == "2")
        #expect(busy.body == #"{"success":false,"error":"the database is busy; try again shortly"}"#)
        released.set()
        try await holding.value

        let again = await server.request("POST", "/api/user/device-token", body: body, bearer: Harness.jwt(sub: "bo"))
        #expect(again.status == 200, "\(again.body)")
    }
}

/// A one-way switch two threads share.
private final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}
