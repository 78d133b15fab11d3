import Foundation
import Testing
import Service
import ServiceCore
import TestSupport

/// A bad config is one clear line on stderr and exit 2, before anything listens.
@Suite struct ConfigTests {
    static func run(_ arguments: [String], environment: [String: String] = [:]) async -> ProcessResult {
        let env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_") }.merging(environment) { $1 }
        return await TestSupport.run(Harness.binary, arguments, environment: env, timeout: 30)
    }

    /// A valid config's text, with `replace` applied.
    static func config(_ server: ServerProcess, _ replace: [(String, String)]) throws -> String {
        var text = try String(contentsOfFile: server.configPath, encoding: .utf8)
        for (a, b) in replace {
            #expect(text.contains(a), "the base config has \(a)")
            text = text.replacingOccurrences(of: a, with: b)
        }
        return server.scratch.file("bad.yaml", text)
    }

    @Test func badConfigsExit2WithOneLine() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let pki = Harness.pki
        let cases: [(String, [(String, String)], String)] = [
            ("missing key file", [("key: \(pki.keyPath)", "key: /nonexistent/AuthKey.p8")], "key: cannot load /nonexistent/AuthKey.p8"),
            ("bad key id", [("key_id: \(pki.keyID)", "key_id: SHORT")], "key id 'SHORT' is not 10 letters or digits"),
            ("wrong field type", [("topic: \(pki.topic)", "topic: [a, b]")], "apps[0].topic must be a string"),
            ("unknown key", [("log_level: warning", "log_level: warning\nlisten_port: 3")], "unknown key listen_port"),
            ("log format", [("log_level: warning", "log_level: warning\nlog_format: xml")], "log_format must be text or json, not 'xml'"),
            ("postgres without user", [("database: sqlite:var/apns.db", "database: postgres://db/apns")], "database URL: no user"),
            ("postgres bad port", [("database: sqlite:var/apns.db", "database: postgresql://u:s3cret@db:x/apns")], "bad port"),
            ("unknown database", [("database: sqlite:var/apns.db", "database: mysql://u:s3cret@db/apns")], "sqlite:PATH or postgres://"),
            ("bad listen", [("listen: 127.0.0.1:0", "listen: nowhere")], "listen must be HOST:PORT"),
            ("bad yaml", [("apps:", "apps: [\n  {")], "is not valid YAML"),
            ("missing api keys", [("api_keys_file: api-keys", "api_keys_file: missing-keys")], "api_keys_file: cannot read"),
            ("http endpoint", [("sandbox_endpoint: https://", "sandbox_endpoint: http://")], "TLS is always on"),
            ("lease", [("lease_seconds: 30", "lease_seconds: zero")], "worker.lease_seconds must be an integer"),
            ("write-back", [("log_level: warning", "log_level: warning\nshutdown_write_back_seconds: 0")],
             "shutdown_write_back_seconds must be an integer in 1...3600"),
            ("unreachable database", [("database: sqlite:var/apns.db",
                                       "database: postgres://apns:s3cret@127.0.0.1:\(freePort())/apns?sslmode=disable")],
             "migrate: cannot reach PostgreSQL at 127.0.0.1:"),
        ]
        for (name, replace, expected) in cases {
            let path = try Self.config(server, replace)
            let r = await Self.run(["--config", path])
            #expect(r.status == 2, "\(name): \(r.status) \(r.stderr)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(name): one line, not \(r.stderr)")
            #expect(r.stderr.hasPrefix("apns-server: ") && r.stderr.contains(expected), "\(name): \(r.stderr)")
            #expect(!r.stderr.contains("s3cret"), "\(name): a database password is never quoted")
            // --check-config finds the same, in the same words.
            let checked = await Self.run(["--check-config", "--config", path])
            #expect(checked.status == 2 && checked.stderr == r.stderr, "\(name): --check-config said \(checked.stderr)")
        }
        for (arguments, expected) in [([], "--config FILE.yaml is required"), (["--config", "/nonexistent.yaml"], "cannot read config file")] {
            let r = await Self.run(arguments)
            #expect(r.status == 2)
            #expect(r.stderr.hasPrefix("apns-server: ") && r.stderr.contains(expected), "\(r.stderr)")
        }
        // The environment overrides the file; its errors are named by variable's key.
        let r = await Self.run(["--config", server.configPath], environment: ["APNS_SERVER_DATABASE": "postgres://x"])
        #expect(r.status == 2 && r.stderr.contains("database URL: no user"), "\(r.stderr)")
        // A secret too short for HS256, never quoted.
        _ = server.scratch.file("short.secret", "tiny-secret")
        let short = await Self.run(["--config", server.configPath], environment: ["APNS_SERVER_USER_JWT_SECRET_FILE": server.scratch.path("short.secret")])
        #expect(short.status == 2 && short.stderr.contains("shorter than 32 bytes") && !short.stderr.contains("tiny-secret"))
        let shortChecked = await Self.run(["--check-config", "--config", server.configPath],
                                          environment: ["APNS_SERVER_USER_JWT_SECRET_FILE": server.scratch.path("short.secret")])
        #expect(shortChecked.status == 2 && shortChecked.stderr == short.stderr, "\(shortChecked.stderr)")
    }

    /// A bad line of `api_keys_file` stops the start with one line that says where and
    /// what, never the key.
    @Test func badAPIKeyLinesExit2() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let secret = "s3cret-key-0123456789abcdef"
        let cases: [(String, String, String)] = [
            ("unknown role", "ops  owner  *  \(secret)", "line 2 of \(server.scratch.path("keys")): the role must be read, support, send or admin, not 'owner'"),
            ("unknown app", "ops  send  staff,shop  \(secret)", "unknown app 'shop'; configured: staff, customer, or * for all"),
            ("bad name", "o/p  send  *  \(secret)", "the name must be 1 to 64 letters"),
            ("three fields", "ops  send  \(secret)", "expected NAME ROLE APPS KEY (or a bare key), not 3 fields"),
            ("short key", "ops  send  *  short", "is not a key (16 or more printable characters"),
            ("same name", "ops  send  *  \(secret)\nops  read  *  other-\(secret)", "the name 'ops' is given to two keys"),
            ("same key", "ops  send  *  \(secret)\nreports  read  *  \(secret)", "the same key is listed twice"),
        ]
        for (name, lines, expected) in cases {
            chmod(server.scratch.file("keys", "# keys\n\(lines)\n"), 0o600)
            let path = try Self.config(server, [("api_keys_file: api-keys", "api_keys_file: keys")])
            let r = await Self.run(["--check-config", "--config", path])
            #expect(r.status == 2, "\(name): \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(expected), "\(name): \(r.stderr)")
            #expect(!r.stderr.contains(secret), "\(name): the key is never quoted")
        }
    }

    /// Quiet hours, batching and a test clock: a bad value stops the start with one line.
    @Test func badQuietHoursAndBatchingConfigsExit2() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let team = "team_id: \(Harness.pki.teamID)"
        func app(_ lines: String) -> [(String, String)] { [(team, team + "\n" + lines)] }
        let cases: [(String, [(String, String)], String)] = [
            ("quiet_hours", app("    quiet_hours: loud"), "apps[0].quiet_hours must be silent or defer, not 'loud'"),
            ("window", app("    types:\n      jobUpdate: {coalesce: {window_seconds: 0}}"),
             "apps[0].types.jobUpdate.coalesce.window_seconds must be an integer in 1...86400"),
            ("no window", app("    types:\n      jobUpdate: {coalesce: {summary: \"{count} updates\"}}"),
             "apps[0].types.jobUpdate.coalesce.window_seconds is required"),
            ("template", app("    types:\n      jobUpdate: {coalesce: {window_seconds: 60, summary: \"{cnt} updates\"}}"),
             "apps[0].types.jobUpdate.coalesce.summary: unknown field {cnt}"),
            ("critical", app("    types:\n      jobUpdate: {critical: maybe}"), "apps[0].types.jobUpdate.critical must be true or false"),
            ("type key", app("    types:\n      jobUpdate: {batch: 5}"), "unknown key apps[0].types.jobUpdate.batch"),
            // The product has no test clock: its time is the machine's.
            ("clock", [("log_level: warning", "log_level: warning\ntest_clock_file: clock")], "unknown key test_clock_file"),
        ]
        for (name, replace, expected) in cases {
            let path = try Self.config(server, replace)
            let r = await Self.run(["--config", path])
            #expect(r.status == 2, "\(name): \(r.status) \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1, "\(name): one line, not \(r.stderr)")
            #expect(r.stderr.hasPrefix("apns-server: ") && r.stderr.contains(expected), "\(name): \(r.stderr)")
            let checked = await Self.run(["--check-config", "--config", path])
            #expect(checked.status == 2 && checked.stderr == r.stderr, "\(name): --check-config said \(checked.stderr)")
        }
        // Whatever the environment says, the release binary reads no clock file.
        _ = server.scratch.file("clock", "0\n")
        let path = try Self.config(server, [("log_level: warning", "log_level: warning\ntest_clock_file: clock")])
        let r = await Self.run(["--config", path], environment: ["APNS_SERVER_TEST_CLOCK": "1"])
        #expect(r.status == 2 && r.stderr.contains("unknown key test_clock_file"), "\(r.stderr)")
    }

    /// A good config: `--check-config` opens the database and loads the keys, says so
    /// on stdout and exits 0 without serving; `--version` prints the version.
    @Test func checkConfigAndVersion() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let r = await Self.run(["--check-config", "--config", server.configPath])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("apns-server: config OK (2 apps, database sqlite:") && !r.stdout.contains("listening"),
                "\(r.stdout)")
        let version = await Self.run(["--version"])
        #expect(version.status == 0 && version.stdout == apnsServerVersionLine + "\n", "\(version.stdout) \(version.stderr)")
        let unknown = await Self.run(["--config", server.configPath, "--frobnicate"])
        #expect(unknown.status == 2 && unknown.stderr.hasPrefix("apns-server: "), "\(unknown.stderr)")
    }

    /// The shipped example, with the files it names beside it (as `make demo-server`
    /// writes them), passes `--check-config`.
    @Test func theExampleConfigPassesCheckConfig() async throws {
        let scratch = Scratch()
        let example = try String(contentsOfFile: Package.fixture("examples/server/apns-server.yaml"), encoding: .utf8)
        let path = scratch.file("apns-server.yaml", example)
        chmod(scratch.file("api-keys", Harness.apiKey + "\n"), 0o600)
        chmod(scratch.file("user-jwt.secret", Harness.jwtSecret + "\n"), 0o600)
        let key = try String(contentsOfFile: Harness.pki.keyPath, encoding: .utf8)
        chmod(scratch.file("AuthKey_ABC123DEFG.p8", key), 0o600)
        let r = await Self.run(["--check-config", "--config", path])
        #expect(r.status == 0 && r.stdout.hasPrefix("apns-server: config OK"), "\(r.stdout) \(r.stderr)")
    }

    @Test func environmentOverridesListenAndDatabase() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        let port = freePort()
        let db = server.scratch.path("other/db.sqlite")
        let p = ChildProcess()
        p.executableURL = URL(fileURLWithPath: Harness.binary)
        p.arguments = ["--config", server.configPath]
        p.environment = ProcessInfo.processInfo.environment.merging(
            ["APNS_SERVER_LISTEN": "127.0.0.1:\(port)", "APNS_SERVER_DATABASE": "sqlite:\(db)"]) { $1 }
        p.standardError = FileHandle.nullDevice
        let stdout = server.scratch.file("stdout.log", "")
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout))
        try p.run()
        defer { kill(p.processIdentifier, SIGTERM); p.waitUntilExit() }
        let end = Date().addingTimeInterval(120)
        while ServerProcess.reportedPort(in: stdout) == nil && p.isRunning && Date() < end {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(ServerProcess.reportedPort(in: stdout) == port, "the environment's port, not the config's")
        #expect(canConnect(port))
        #expect(FileManager.default.fileExists(atPath: db))
    }
}
