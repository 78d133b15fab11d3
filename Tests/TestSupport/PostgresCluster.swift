import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A throw-away PostgreSQL server for tests: a new cluster (`initdb`) in a temporary
/// folder, listening on 127.0.0.1 only, on a free port, trusting local connections
/// (nothing else can reach it), with durability off (a test's data is not kept).
/// `stop()` ends it and deletes the folder; `restart()` stops and starts it again on
/// the same port and data (a database that restarts mid-run).
///
/// PostgreSQL refuses to run as root, and tests run as root here: the server's
/// programs then run as the `postgres` user (Debian's package creates it), through
/// `runuser`, and the folder belongs to that user.
public final class PostgresCluster: @unchecked Sendable {
    /// The superuser the tests connect as (no password: trust on 127.0.0.1).
    public let user = "apns"
    /// The one role that must give a password on 127.0.0.1: a test that uses it makes it.
    public static let passwordUser = "apns_password"
    public private(set) var port: UInt16
    /// The temporary folder: data/, the server's log, its Unix socket.
    public let folder: String
    private let bin: String
    private let lock = NSLock()
    private var running = false
    private var databases = 0
    /// Templates made (or being made) by `newDatabase(template:prepare:)`, by name.
    private var templates: [String: Task<Void, any Error>] = [:]

    /// With a certificate (`TestPKI`'s server.crt/server.key, for 127.0.0.1), the
    /// server offers TLS too (plain connections still work: `pg_hba` says `host`).
    public struct TLS: Sendable {
        public let certificate: String
        public let key: String
        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }
    private let tls: TLS?

    /// Creates and starts a cluster; throws a one-line error when PostgreSQL is
    /// missing or does not start (with the end of its log).
    public init(tls: TLS? = nil) throws {
        self.tls = tls
        bin = try Self.findBinaries()
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("apns-pg-\(UUID().uuidString)").path
        port = freePort()
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        do {
            try Self.giveToServerUser(folder)
            try initdb()
            // The port was free when picked; another test's server may take it before
            // ours binds: then another port.
            for attempt in 1...3 {
                do {
                    try start()
                    break
                } catch let error as ClusterError where attempt < 3 && logTail().contains("could not bind") {
                    _ = error
                    try? FileManager.default.removeItem(atPath: folder + "/server.log")
                    port = freePort()
                }
            }
        } catch {
            try? FileManager.default.removeItem(atPath: folder)
            throw error
        }
    }

    deinit { stop() }

    /// `postgres://apns@127.0.0.1:PORT/NAME`, in clear, with a minute to connect: a
    /// connection is a process the server forks, and with the whole suite running on
    /// two cores that has taken over five seconds. Tests of the timeout give their own.
    public func url(database: String) -> String {
        "postgres://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable&connect_timeout=60"
    }

    /// A new empty database; its URL.
    public func createDatabase() throws -> String {
        try createDatabase(template: nil)
    }

    /// A new database, a copy of `template` (nil: PostgreSQL's own, empty); its URL.
    /// createdb is a client on 127.0.0.1 like the tests: it runs as we do, without
    /// runuser's session set-up for every database.
    private func createDatabase(template: String?) throws -> String {
        let name = lock.withLock { databases += 1; return "test_\(databases)" }
        try run("createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", user] + (template.map { ["-T", $0] } ?? []) + [name],
                doing: "createdb \(name)", asServerUser: false)
        return url(database: name)
    }

    /// Starts the server (after `init`, only after `stop()`), and returns once it
    /// accepts connections.
    public func start() throws {
        let started = runAsServerUser("pg_ctl", ["start", "-D", folder + "/data", "-l", folder + "/server.log", "-s",
                                                 "-o", "-p \(port)"])
        guard started.status == 0 else {
            throw ClusterError("PostgreSQL did not start on 127.0.0.1:\(port): \(logTail())")
        }
        // pg_ctl returns once the postmaster is forked: wait for the state that lasts,
        // a server that answers, or a postmaster that is gone (then the log says why).
        let deadline = Date().addingTimeInterval(120)
        while Date() < deadline {
            let ready = runAsServerUser("pg_isready", ["-q", "-h", "127.0.0.1", "-p", String(port), "-t", "5"])
            if ready.status == 0 {
                lock.withLock { running = true }
                return
            }
            let status = runAsServerUser("pg_ctl", ["status", "-D", folder + "/data"])
            if status.status == 3 {  // "no server running": it started and died
                throw ClusterError("PostgreSQL did not start: \(logTail())")
            }
            usleep(100_000)
        }
        throw ClusterError("PostgreSQL did not answer on 127.0.0.1:\(port) within 120 s: \(logTail())")
    }

    /// Stops the server (fast: open transactions are rolled back, connections closed)
    /// and deletes the folder. Safe to call twice.
    public func stop() {
        shutDown()
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Stops the server at once (its data is thrown away: no shutdown checkpoint) and
    /// leaves the folder, hundreds of databases by the end of a run, to an `rm` of its
    /// own: the test process ends without waiting for the files to go.
    func stopAtExit() {
        let wasRunning = lock.withLock { defer { running = false }; return running }
        if wasRunning {
            _ = runAsServerUser("pg_ctl", ["stop", "-D", folder + "/data", "-m", "immediate", "-w", "-s"])
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        // Nothing else open: a pipe it held would keep its reader from the end.
        guard ChildProcess.closeFrom(&actions, 3) == 0 else { return }
        let words: [String] = ["/bin/rm", "-rf", folder]
        let argv = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid = pid_t()
        _ = posix_spawn(&pid, "/bin/rm", &actions, nil, argv, environ)
    }

    /// Stops and starts again, with the same data and port: clients see their
    /// connections closed, and new ones work once it is back.
    public func restart() throws {
        shutDown()
        try start()
    }

    // MARK: From async tests

    // initdb, pg_ctl and createdb take seconds (more on a loaded machine) and block
    // their thread: async tests call these, which wait on a thread of their own
    // (`offPool`) and leave the cooperative pool's two threads to the other tests.

    /// `init()`, off the cooperative pool.
    public static func make(tls: TLS? = nil) async throws -> PostgresCluster {
        try await offPool { Result { try PostgresCluster(tls: tls) } }.get()
    }

    /// `createDatabase()`, off the cooperative pool.
    public func newDatabase() async throws -> String {
        try await offPool { [self] in Result { try createDatabase() } }.get()
    }

    /// A new database copied from the template `name`, which `prepare` fills once, on
    /// the first call, given its URL (a migrated schema: migrations then run once for
    /// all the tests, not once per test). `prepare` must close its connections before
    /// it returns: PostgreSQL copies only a database nobody is connected to.
    public func newDatabase(template name: String,
                            prepare: @escaping @Sendable (String) async throws -> Void) async throws -> String {
        let template = lock.withLock {
            if let existing = templates[name] { return existing }
            let making = Task { [self] in
                try await offPool { [self] in
                    Result { try run("createdb", ["-h", "127.0.0.1", "-p", String(port), "-U", user, name],
                                     doing: "createdb \(name)", asServerUser: false) }
                }.get()
                try await prepare(url(database: name))
            }
            templates[name] = making
            return making
        }
        try await template.value
        return try await offPool { [self] in Result { try createDatabase(template: name) } }.get()
    }

    /// `restart()`, off the cooperative pool.
    public func restartOffPool() async throws {
        try await offPool { [self] in Result { try restart() } }.get()
    }

    /// `stop()`, off the cooperative pool.
    public func stopOffPool() async {
        await offPool { [self] in stop() }
    }

    private func shutDown() {
        let wasRunning = lock.withLock { defer { running = false }; return running }
        guard wasRunning else { return }
        _ = runAsServerUser("pg_ctl", ["stop", "-D", folder + "/data", "-m", "fast", "-w", "-s"])
    }

    // MARK: Setting up

    private func initdb() throws {
        try run("initdb", ["-D", folder + "/data", "-U", user, "-A", "trust", "-E", "UTF8", "--locale=C",
                           "--no-sync", "--no-instructions"], doing: "initdb")
        // Only 127.0.0.1 (and the socket in our own folder); no durability (a test's
        // data dies with it); room for the pools of every test running at once (the
        // shared cluster serves the whole run).
        let settings = """

            listen_addresses = '127.0.0.1'
            unix_socket_directories = '\(folder)'
            fsync = off
            synchronous_commit = off
            full_page_writes = off
            max_connections = 1000
            shared_buffers = 64MB
            """
        // The server reads its key only when it is its own user's and owner-only.
        var tlsSettings = ""
        if let tls {
            for (from, to) in [(tls.certificate, "server.crt"), (tls.key, "server.key")] {
                let copy = folder + "/" + to
                try Data(contentsOf: URL(fileURLWithPath: from)).write(to: URL(fileURLWithPath: copy))
                chmod(copy, 0o600)
                try Self.giveToServerUser(copy)
            }
            tlsSettings = """

                ssl = on
                ssl_cert_file = '\(folder)/server.crt'
                ssl_key_file = '\(folder)/server.key'
                """
        }
        // One role signs in with a password (`passwordUser`), for the tests of how a
        // password reaches a client; every other is trusted.
        let hba = """
            local all all trust
            host  all \(Self.passwordUser) 127.0.0.1/32 scram-sha-256
            host  all all 127.0.0.1/32 trust
            """
        let data = folder + "/data"
        guard let conf = FileHandle(forWritingAtPath: data + "/postgresql.conf") else {
            throw ClusterError("cannot write \(data)/postgresql.conf")
        }
        conf.seekToEndOfFile()
        conf.write(Data((settings + tlsSettings).utf8))
        try conf.close()
        try Data((hba + "\n").utf8).write(to: URL(fileURLWithPath: data + "/pg_hba.conf"))
        try Self.giveToServerUser(data + "/pg_hba.conf")
    }

    /// Debian's layout: /usr/lib/postgresql/VERSION/bin, newest version first.
    private static func findBinaries() throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions {
            let bin = "\(root)/\(version)/bin"
            if ["initdb", "postgres", "pg_ctl", "pg_isready", "createdb"]
                .allSatisfy({ FileManager.default.isExecutableFile(atPath: "\(bin)/\($0)") }) {
                return bin
            }
        }
        throw ClusterError("PostgreSQL is not installed (no \(root)/*/bin/initdb): run make test, which installs it")
    }

    // MARK: Running its programs

    /// The account the server runs as when we are root.
    private static var serverUser: (name: String, uid: uid_t, gid: gid_t)? {
        guard geteuid() == 0 else { return nil }
        guard let entry = getpwnam("postgres") else { return nil }
        return ("postgres", entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    private static func giveToServerUser(_ path: String) throws {
        guard geteuid() == 0 else { return }
        guard let user = serverUser else {
            throw ClusterError("tests run as root and there is no postgres user to run PostgreSQL as: run make test, which installs it")
        }
        guard chown(path, user.uid, user.gid) == 0 else {
            throw ClusterError("cannot give \(path) to the postgres user: \(String(cString: strerror(errno)))")
        }
    }

    /// Runs one of the server's programs to its end (as the server's user when we are
    /// root), its output in a file. Not Foundation's `Process`: `pg_ctl start` leaves a
    /// server that keeps the output it inherited open (a pipe would never end), and
    /// Process on Linux has lost the exit of children started from two threads at
    /// once (suites start their clusters side by side).
    private func runAsServerUser(_ program: String, _ arguments: [String],
                                 asServerUser: Bool = true) -> (status: Int32, output: String) {
        var argv = [bin + "/" + program] + arguments
        if asServerUser, let user = Self.serverUser { argv = ["/usr/sbin/runuser", "-u", user.name, "--"] + argv }
        let outputPath = folder + "/command-\(UUID().uuidString).out"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // Nothing else: `pg_ctl start` leaves a server running for the whole suite, and
        // any descriptor it inherited stays open as long. Another test's pipe held that
        // way never reaches its end, and its reader (tinyproxy's stderr) waited forever.
        guard ChildProcess.closeFrom(&actions, 3) == 0 else { return (-1, "cannot run \(argv[0]): closefrom") }
        let cArgs = argv.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArgs, environ)
        guard spawned == 0 else {
            return (-1, "cannot run \(argv[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS, which Swift does not import.
        let exited = status & 0x7f == 0
        return (exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), output)
    }

    private func run(_ program: String, _ arguments: [String], doing: String, asServerUser: Bool = true) throws {
        let result = runAsServerUser(program, arguments, asServerUser: asServerUser)
        guard result.status == 0 else {
            let said = result.output.split(separator: "\n").prefix(3).joined(separator: " / ")
            throw ClusterError("\(doing) failed (exit \(result.status)): \(said)")
        }
    }

    private func logTail() -> String {
        let log = (try? String(contentsOfFile: folder + "/server.log", encoding: .utf8)) ?? "(no log)"
        return log.split(separator: "\n").suffix(5).joined(separator: " / ")
    }
}

// MARK: One for the test process

extension PostgresCluster {
    /// The test process's cluster: started by the first test that asks, shared by
    /// every test that only needs databases on it (each makes its own, so they run
    /// side by side), stopped when the process exits. A test that restarts or stops
    /// its server, or needs one set up otherwise (TLS), starts its own (`make`).
    public static func shared() async throws -> PostgresCluster {
        try await SharedCluster.started.value
    }
}

private enum SharedCluster {
    /// Started once; a failure is every caller's failure (one line each), not a new
    /// try per suite.
    static let started = Task<PostgresCluster, any Error> {
        let cluster = try await PostgresCluster.make()
        running.withLock { $0 = cluster }
        atexit { SharedCluster.stopAtExit() }
        return cluster
    }

    static let running = LockedValue<PostgresCluster?>(nil)

    /// The test process is ending: its daemon and folder go with it.
    static func stopAtExit() {
        running.withLock { cluster in
            cluster?.stopAtExit()
            cluster = nil
        }
    }
}

/// A value behind a lock, for state shared by tests' threads.
private final class LockedValue<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

public struct ClusterError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
