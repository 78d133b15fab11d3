import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Servers the transport tests talk to, all on 127.0.0.1, started and stopped by the test.

/// A server program run as a subprocess for the length of a test; its stdout and
/// stderr go to a log file the test can read after `stop()`.
final class ServerProcess: @unchecked Sendable {
    let port: UInt16
    let log: URL
    private let process = ChildProcess()

    init(_ path: String, _ arguments: [String], port: UInt16) throws {
        self.port = port
        log = FileManager.default.temporaryDirectory.appendingPathComponent("capns-server-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let handle = try FileHandle(forWritingTo: log)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 where !canConnect(port) {
            guard process.isRunning else { break }
            usleep(20_000)
        }
    }

    /// Kills the server and returns its log. SIGKILL, because nghttpd can sit out a
    /// SIGTERM; a killed child is reaped at once, so the wait is not a real block.
    @discardableResult
    func stop() -> String {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        return (try? String(contentsOf: log, encoding: .utf8)) ?? ""
    }

    /// The log goes with the server: a suite starts hundreds, and /tmp would keep them all.
    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: log)
    }

    /// nghttpd (Debian package nghttp2-server): HTTP/2 over TLS with ALPN h2, answering 404
    /// to every POST (its docroot is empty), with the given SETTINGS_MAX_CONCURRENT_STREAMS.
    /// `verbose` (-v) logs every frame, which lets a test read the headers and count the
    /// RST_STREAM frames it received.
    static func nghttpd(maxStreams: Int = 100, verbose: Bool = false, key: String = TestPKI.shared.serverKey,
                        certificate: String = TestPKI.shared.serverCertificate) throws -> ServerProcess {
        let port = freePort()
        let docroot = FileManager.default.temporaryDirectory.appendingPathComponent("capns-h2-www")
        try FileManager.default.createDirectory(at: docroot, withIntermediateDirectories: true)
        return try ServerProcess("/usr/sbin/nghttpd",
                                 (verbose ? ["-v"] : []) +
                                 ["--address=127.0.0.1", "--max-concurrent-streams=\(maxStreams)",
                                  "-d", docroot.path, "\(port)", key, certificate],
                                 port: port)
    }

    /// openssl s_server -www: TLS with a valid certificate but HTTP/1.x only; `alpn`, when
    /// given, is the one protocol it offers (without, it takes no part in ALPN).
    static func http1Only(alpn: String? = nil) throws -> ServerProcess {
        let pki = TestPKI.shared, port = freePort()
        return try ServerProcess("/usr/bin/openssl",
                                 ["s_server", "-quiet", "-www"] + (alpn.map { ["-alpn", $0] } ?? []) +
                                 ["-accept", "127.0.0.1:\(port)", "-cert", pki.serverCertificate,
                                  "-key", pki.serverKey], port: port)
    }
}

/// The header names nghttpd -v logged as received, e.g. "recv (stream_id=3) apns-id: ...".
func requestHeaderNames(in log: String) -> Set<String> {
    var names: Set<String> = []
    for line in log.split(separator: "\n") where line.contains("recv (stream_id=") {
        guard let close = line.firstIndex(of: ")") else { continue }
        let rest = line[line.index(after: close)...].drop { $0 == " " }
        if let colon = rest.dropFirst().firstIndex(of: ":") { names.insert(String(rest[..<colon])) }
    }
    return names
}

/// A server that takes connections and never answers, in one of two ways.
enum Silence: String, CaseIterable, Sendable {
    /// TCP completes (the kernel's backlog), TLS never starts: SilentPort.
    case inHandshake
    /// TLS completes with ALPN h2, then no HTTP/2 frame ever comes: SilentH2Server.
    case afterHandshake

    func start() throws -> any SilentServer {
        switch self {
        case .inHandshake: SilentPort()
        case .afterHandshake: try SilentH2Server()
        }
    }
}

protocol SilentServer: Sendable {
    var port: UInt16 { get }
    func stop()
}

/// A TCP listener that never accepts (TestSupport's): the kernel completes the
/// handshake, then nothing ever answers, not even TLS.
extension SilentPort: SilentServer {
    /// The socket stays open to deinit: a closed one would refuse, not stay silent.
    func stop() {}
}

/// openssl s_server offering ALPN h2: it completes the TLS handshake, then reads and
/// never answers (no SETTINGS either). Its stdin stays open: at end of input it would quit.
final class SilentH2Server: SilentServer, @unchecked Sendable {
    let port = freePort()
    private let process = ChildProcess()
    private let input = Pipe()

    init() throws {
        let pki = TestPKI.shared
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-quiet", "-alpn", "h2", "-accept", "127.0.0.1:\(port)",
                             "-cert", pki.serverCertificate, "-key", pki.serverKey]
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 where !canConnect(port) && process.isRunning {
            usleep(20_000)
        }
    }

    /// SIGKILL: a child spawned from a Dispatch thread may have SIGTERM blocked.
    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? input.fileHandleForWriting.close()
    }

    deinit { stop() }
}
