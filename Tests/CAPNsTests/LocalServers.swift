import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Servers the transport tests talk to, all on 127.0.0.1, started and stopped by the test.

/// True once something accepts TCP connections on 127.0.0.1:port.
func canConnect(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}

/// A server program run as a subprocess for the length of a test; its stdout and
/// stderr go to a log file the test can read after `stop()`.
final class ServerProcess: @unchecked Sendable {
    let port: UInt16
    let log: URL
    private let process = Process()

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

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    /// nghttpd (Debian package nghttp2-server): HTTP/2 over TLS with ALPN h2. `-v` logs
    /// every frame, which lets a test count the RST_STREAM frames it received.
    static func nghttpd(docroot: String) throws -> ServerProcess {
        let pki = TestPKI.shared, port = freePort()
        return try ServerProcess("/usr/sbin/nghttpd",
                                 ["-v", "--address=127.0.0.1", "-d", docroot, "\(port)",
                                  pki.serverKey, pki.serverCertificate], port: port)
    }

    /// openssl s_server -www: TLS with a valid certificate but HTTP/1.x only (no ALPN h2).
    static func http1Only() throws -> ServerProcess {
        let pki = TestPKI.shared, port = freePort()
        return try ServerProcess("/usr/bin/openssl",
                                 ["s_server", "-quiet", "-www", "-accept", "127.0.0.1:\(port)",
                                  "-cert", pki.serverCertificate, "-key", pki.serverKey], port: port)
    }
}

/// A TCP listener that never accepts: the kernel completes the handshake, then
/// nothing ever answers (not even TLS).
final class SilentListener: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32

    init() {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
        }
        listen(fd, 16)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        port = UInt16(bigEndian: addr.sin_port)
    }

    deinit { close(fd) }
}
