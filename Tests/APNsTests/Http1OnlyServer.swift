import Foundation
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// `openssl s_server -www` on 127.0.0.1: TLS with a certificate the client trusts,
/// but HTTP/1.x only (no ALPN h2), for the lifetime of this object.
final class Http1OnlyServer: @unchecked Sendable {
    let port: UInt16
    private let process = ChildProcess()

    private init() throws {
        let pki = TestPKI.shared
        port = freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-quiet", "-www", "-accept", "127.0.0.1:\(port)",
                             "-cert", pki.serverCertificate, "-key", pki.serverKey]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Returns once it accepts connections (or gave up trying for 4 s). Waits without
    /// holding a thread: the suite's other tests share a small pool.
    static func start() async throws -> Http1OnlyServer {
        let server = try Http1OnlyServer()
        for _ in 0..<200 where server.process.isRunning && !canConnect(server.port) {
            try await Task.sleep(for: .milliseconds(20))
        }
        return server
    }

    /// SIGKILL: a killed child is reaped at once.
    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}
