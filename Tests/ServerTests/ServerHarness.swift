import APNsMock
import CServiceCrypto
import Foundation
import Store
import TestSupport

/// What the server tests share: the built `apns-server` as a child process, two
/// mocks (sandbox and production) on the test PKI over real TLS, a config and a
/// SQLite file in a scratch folder, real HTTP over loopback, JWTs signed with OpenSSL's HMAC.
enum Harness {
    static let pki = TestPKI.shared
    static let binary = Package.executable("apns-server")
    static let apiKey = "test-api-key-0123456789abcdef"
    static let jwtSecret = "a-very-secret-hs256-key-for-the-tests-0123456789"

    /// The seed's RepairMinder mapping, in the seed's order.
    static let preferences: [(String, String?)] = [
        ("order_status_changed", "orderStatusChanged"), ("order_created", "orderCreated"),
        ("order_collected", "orderCollected"), ("device_status_changed", "deviceStatusChanged"),
        ("quote_approved", "quoteApproved"), ("quote_rejected", "quoteRejected"),
        ("payment_received", "paymentReceived"), ("enquiry_received", "newEnquiry"),
        ("enquiry_reply", "enquiryReply"), ("device_assigned", nil), ("ticket_message", nil), ("ticket_reopened", nil),
    ]

    static func mock(sandbox: Bool, _ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        var c = MockConfiguration(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey,
                                  authKeys: [pki.keyID: pki.keyPath], teamIDs: [pki.teamID], topics: [pki.topic])
        c.recordRequests = true
        c.sandbox = sandbox
        tweak(&c)
        return try MockServer(c)
    }

    /// Deterministic, distinct, well-formed device tokens (TestSupport's).
    static func tokens(_ count: Int, seed: Int = 0) -> [String] { deterministicTokens(count, seed: seed) }

    // MARK: JWTs (signed outside the server's code: openssl)

    static func b64url(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func jwt(sub: String?, exp: Int? = Int(Date().timeIntervalSince1970) + 3600, companyID: String? = nil,
                    alg: String = "HS256", secret: String = jwtSecret) -> String {
        let header = #"{"alg":"\#(alg)","typ":"JWT"}"#
        var claims: [String] = []
        if let sub { claims.append(#""sub":"\#(sub)""#) }
        if let exp { claims.append(#""exp":\#(exp)"#) }
        if let companyID { claims.append(#""company_id":"\#(companyID)""#) }
        claims.append(#""role":"authenticated""#)
        let input = b64url(Data(header.utf8)) + "." + b64url(Data("{\(claims.joined(separator: ","))}".utf8))
        if alg == "none" { return input + "." }
        return input + "." + hs256(input, secret: secret)
    }

    /// The HS256 signature of a JWT's signing input, base64url. OpenSSL's HMAC in
    /// process: a subprocess per JWT would block a thread of the test pool for each of
    /// the hundreds the suite signs (`theHarnessSignsJWTsAsOpenSSLDoes` holds it to the
    /// openssl command).
    static func hs256(_ input: String, secret: String) -> String {
        var mac = [UInt8](repeating: 0, count: 32)
        let key = Array(secret.utf8), data = Array(input.utf8)
        precondition(cservice_hmac_sha256(key, key.count, data, data.count, &mac) == 0, "HMAC-SHA256 failed")
        return b64url(Data(mac))
    }
}

/// One apns-server process with its own folder, config, database and port.
final class ServerProcess: @unchecked Sendable {
    let scratch = Scratch()
    /// The port it listens on, known once started: the config says port 0, and the
    /// server reports the kernel's pick on stdout. (A port picked beforehand can be
    /// taken by another test's server first when tests run side by side.)
    private(set) var port: UInt16 = 0
    let configPath: String
    var databasePath: String { scratch.path("var/apns.db") }
    /// The config's postgres:// URL; nil: the SQLite file at `databasePath`.
    let databaseURL: String?
    private var process: ChildProcess?
    private var stderrPath: String { scratch.path("stderr.log") }
    private var stdoutPath: String { scratch.path("stdout.log") }
    let sandbox: MockServer?
    let production: MockServer?

    struct Options {
        var leaseSeconds = 30
        var batchSize = 1000
        /// `worker.fan_out_part`: nil, the default.
        var fanOutPart: Int?
        /// `worker.handoff_limit`: nil, the default.
        var handoffLimit: Int?
        var pollMillis = 250
        var logLevel = "warning"
        var extraTopLevel = ""
        var maxAttempts = 25
        var backoffBaseMillis = 200
        /// More apps after staff and customer: (app_type, their other lines, each
        /// indented four spaces), on the same key and mocks.
        var extraApps: [(appType: String, lines: String)] = []
        /// The config's `database:` (a postgres:// URL); nil: the SQLite file below.
        var database: String?
    }

    init(sandbox: MockServer?, production: MockServer?, options: Options = Options()) {
        self.sandbox = sandbox
        databaseURL = options.database
        self.production = production
        let pki = Harness.pki
        // Owner-only, as an operator's would be: the server warns of secrets others can read.
        chmod(scratch.file("api-keys", "# backend keys\n\(Harness.apiKey)\n"), 0o600)
        chmod(scratch.file("user-jwt.secret", Harness.jwtSecret + "\n"), 0o600)
        func endpoints(_ indent: String) -> String {
            var lines: [String] = []
            // An endpoint nothing listens on when a test gives no mock for it.
            lines.append("\(indent)sandbox_endpoint: https://127.0.0.1:\(sandbox?.port ?? 9)")
            lines.append("\(indent)production_endpoint: https://127.0.0.1:\(production?.port ?? 9)")
            lines.append("\(indent)cacert: \(pki.caFile)")
            return lines.joined(separator: "\n")
        }
        let prefs = Harness.preferences.map { "      \($0.0): \($0.1 ?? "null")" }.joined(separator: "\n")
        let extraApps = options.extraApps.map { app in
            """
              - app_type: \(app.appType)
                topic: \(pki.topic)
                key: \(pki.keyPath)
                key_id: \(pki.keyID)
                team_id: \(pki.teamID)
            \(endpoints("    "))
            \(app.lines)
            """
        }.joined(separator: "\n")
        let yaml = """
            listen: 127.0.0.1:0
            database: \(options.database ?? "sqlite:var/apns.db")
            api_keys_file: api-keys
            user_jwt_secret_file: user-jwt.secret
            log_level: \(options.logLevel)
            metrics_refresh_ms: 100
            worker:
              batch_size: \(options.batchSize)
              lease_seconds: \(options.leaseSeconds)
              poll_interval_ms: \(options.pollMillis)
              max_attempts: \(options.maxAttempts)
              backoff_base_ms: \(options.backoffBaseMillis)
              \(options.fanOutPart.map { "fan_out_part: \($0)" } ?? "")
              \(options.handoffLimit.map { "handoff_limit: \($0)" } ?? "")
            \(options.extraTopLevel)
            apps:
              - app_type: staff
                topic: \(pki.topic)
                key: \(pki.keyPath)
                key_id: \(pki.keyID)
                team_id: \(pki.teamID)
            \(endpoints("    "))
                preferences:
            \(prefs)
              - app_type: customer
                topic: \(pki.topic)
                key: \(pki.keyPath)
                key_id: \(pki.keyID)
                team_id: \(pki.teamID)
            \(endpoints("    "))
                preferences:
                  order_status_changed: orderStatusChanged
                  quote_approved: quoteApproved
            \(extraApps)
            """
        configPath = scratch.file("apns-server.yaml", yaml)
    }

    /// Points the config's production endpoint at `mock` instead (for the next
    /// start): a restart against an APNs that now answers.
    func retarget(production mock: MockServer) throws {
        var yaml = try String(contentsOfFile: configPath, encoding: .utf8)
        if let old = production?.port {
            yaml = yaml.replacingOccurrences(of: "production_endpoint: https://127.0.0.1:\(old)\n",
                                             with: "production_endpoint: https://127.0.0.1:\(mock.port)\n")
        }
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
    }

    /// Starts the server and waits until it accepts connections.
    func start(environment: [String: String] = [:]) async throws {
        let p = ChildProcess()
        p.executableURL = URL(fileURLWithPath: Harness.binary)
        p.arguments = ["--config", configPath]
        p.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_") }
            .merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        err.seekToEndOfFile()
        p.standardError = err
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        try p.run()
        process = p
        // Generous: a loaded machine starting a dozen debug servers at once is slow.
        let end = Date().addingTimeInterval(120)
        while true {
            if let listening = Self.reportedPort(in: stdoutPath) {
                port = listening
                return
            }
            guard p.isRunning else { throw StartError(stderr: stderr) }
            guard Date() < end else { throw StartError(stderr: "not listening after 120 s\n" + stderr) }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// The port in apns-server's "apns-server listening on HOST:PORT" line, once written.
    static func reportedPort(in path: String) -> UInt16? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("apns-server listening on ") }),
              let port = line.split(separator: ":").last.flatMap({ UInt16($0) }) else { return nil }
        return port
    }

    struct StartError: Error, CustomStringConvertible {
        let stderr: String
        var description: String { "apns-server did not start: \(stderr)" }
    }

    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    var pid: Int32 { process?.processIdentifier ?? 0 }
    var isRunning: Bool { process?.isRunning ?? false }

    /// Sends `signal` and waits for the exit; returns the exit status (or the signal).
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, timeout: TimeInterval = 60) async -> Int32 {
        guard let p = process else { return -1 }
        if p.isRunning { kill(p.processIdentifier, signal) }
        let end = Date().addingTimeInterval(timeout)
        while p.isRunning && Date() < end { try? await Task.sleep(for: .milliseconds(20)) }
        if p.isRunning { kill(p.processIdentifier, SIGKILL) }
        p.waitUntilExit()
        process = nil
        return p.terminationStatus
    }

    deinit {
        if let p = process, p.isRunning { kill(p.processIdentifier, SIGKILL) }
    }

    /// Opens the server's database (for seeding many devices, and to check the log).
    func store() throws -> SQLiteStore { try SQLiteStore(path: databasePath) }

    // MARK: HTTP

    func send(_ method: String, _ path: String, body: String?, bearer: String?,
              headers: [(String, String)]) async -> HTTPResponse {
        var h = headers
        if let bearer { h.append(("Authorization", "Bearer \(bearer)")) }
        return await HTTP.send(port: port, method: method, path: path, body: body.map { Array($0.utf8) }, headers: h)
    }

    /// Waits until the outbox is empty (every delivery final); the default is for a
    /// loaded machine, not a goal. Read from the database: the metrics' gauge is
    /// counted on its own clock, and may be older than the caller's last request.
    func drained(timeout: TimeInterval) async throws {
        // The server's own database, whichever engine the config names.
        let store = try database()
        defer { Task { await store.close() } }
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if (try? await store.outboxDepth()) == 0 { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw DrainTimeout()
    }

    struct DrainTimeout: Error {}
}

struct HTTPResponse: Sendable {
    let status: Int
    let headers: [(String, String)]
    let body: String

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
    }
}

/// A minimal HTTP/1.1 client over a blocking socket (Connection: close), so tests
/// see the exact bytes the server wrote and can send what a real client would not.
enum HTTP {
    static func send(port: UInt16, method: String, path: String, body: [UInt8]?, headers: [(String, String)]) async -> HTTPResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if let body {
            head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        let raw = await exchange(port: port, Array(head.utf8) + (body ?? []))
        return parse(raw)
    }

    /// On a thread of its own: an answer can take minutes to come, and on Linux
    /// Dispatch's global queues share the cooperative pool's threads.
    static func exchange(port: UInt16, _ bytes: [UInt8]) async -> [UInt8] {
        await offPool { exchangeSync(port: port, bytes) }
    }

    static func exchangeSync(port: UInt16, _ bytes: [UInt8]) -> [UInt8] {
        guard let fd = connectLoopback(port: port) else { return [] }
        defer { close(fd) }
        // Generous: a 20,000-device fan-out answers after its commit, which a loaded
        // machine (the whole suite, three servers on one PostgreSQL) can take long to reach.
        var tv = timeval(tv_sec: 180, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            sent += n
        }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buf, buf.count)
            if n <= 0 { break }
            out.append(contentsOf: buf[0..<n])
        }
        return out
    }

    static func parse(_ raw: [UInt8]) -> HTTPResponse {
        let text = String(decoding: raw, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return HTTPResponse(status: 0, headers: [], body: text) }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            if let c = line.firstIndex(of: ":") {
                headers.append((line[..<c].lowercased(), line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)))
            }
        }
        var body = String(text[split.upperBound...])
        if headers.contains(where: { $0.0 == "transfer-encoding" && $0.1.contains("chunked") }) {
            body = dechunk(body)
        }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    static func dechunk(_ s: String) -> String {
        var out = ""
        var rest = Substring(s)
        while let r = rest.range(of: "\r\n"), let size = Int(rest[..<r.lowerBound], radix: 16), size > 0 {
            let start = r.upperBound
            let bytes = Array(rest[start...].utf8)
            out += String(decoding: bytes[0..<min(size, bytes.count)], as: UTF8.self)
            rest = Substring(String(decoding: bytes[min(size + 2, bytes.count)...], as: UTF8.self))
        }
        return out
    }
}

/// curl, as a backend developer would type it.
func curl(_ arguments: [String]) async -> (status: Int, body: String) {
    let r = await run("/usr/bin/curl", ["-s", "-S", "-w", "\n%{http_code}"] + arguments, timeout: 30)
    let parts = r.stdout.split(separator: "\n", omittingEmptySubsequences: false)
    return (Int(parts.last ?? "") ?? 0, parts.dropLast().joined(separator: "\n"))
}

/// A blocking TCP connection to 127.0.0.1:port; nil when it could not be made.
func connectLoopback(port: UInt16) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let ok = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard ok == 0 else {
        close(fd)
        return nil
    }
    return fd
}
