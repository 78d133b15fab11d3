import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real HTTP proxy for the proxy tests: Debian's tinyproxy (`make deps` installs
/// it), on 127.0.0.1 and a free port, with its config, log and pid file in a scratch
/// folder; started by `init`, stopped by `stop()` (or when released).
///
/// What tinyproxy 1.11.1 answers CONNECT with (seen by running it): 200 when allowed;
/// 407 Proxy Authentication Required when BasicAuth is on and no credentials came;
/// 401 Unauthorized when wrong ones came; 403 Access violation for a port outside its
/// ConnectPort list (with no ConnectPort line every port is allowed); 500 Unable to
/// connect when the target does not answer.
public final class Tinyproxy: @unchecked Sendable {
    public static let binary = "/usr/bin/tinyproxy"

    public let port: UInt16
    private let scratch = Scratch()
    private let logPath: String
    private var processHolder: ChildProcess?

    /// `connectPorts`: the ports CONNECT may reach (nil: any). `basicAuth`: the one user
    /// it accepts. tinyproxy's config takes a password of letters and digits.
    public init(connectPorts: [UInt16]? = nil, basicAuth: (user: String, password: String)? = nil) throws {
        logPath = scratch.path("tinyproxy.log")
        var lastError = ""
        // freePort() can race another test for the port: then tinyproxy exits and we try another.
        for _ in 0..<5 {
            let port = freePort()
            var lines = [
                "Port \(port)", "Listen 127.0.0.1", "Timeout 60", "MaxClients 64",
                "LogFile \"\(logPath)\"", "LogLevel Connect", "PidFile \"\(scratch.path("tinyproxy.pid"))\"",
                "Allow 127.0.0.1",
            ]
            lines += (connectPorts ?? []).map { "ConnectPort \($0)" }
            if let basicAuth { lines.append("BasicAuth \(basicAuth.user) \(basicAuth.password)") }
            let config = scratch.file("tinyproxy-\(port).conf", lines.joined(separator: "\n") + "\n")
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: Tinyproxy.binary)
            process.arguments = ["-d", "-c", config]
            process.standardOutput = FileHandle.nullDevice
            let err = Pipe()
            process.standardError = err
            try process.run()
            while process.isRunning && !canConnect(port) { usleep(10_000) }
            if process.isRunning {
                self.port = port
                self.processHolder = process
                return
            }
            process.waitUntilExit()
            lastError = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                + ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")
        }
        throw StartError(message: "tinyproxy did not start: \(lastError)")
    }

    /// tinyproxy's log so far.
    public var log: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    /// The CONNECT requests it logged, e.g. "CONNECT 127.0.0.1:4433 HTTP/1.1", in order.
    public var connectRequests: [String] {
        log.split(separator: "\n").compactMap { line in
            line.range(of: "): CONNECT ").map { String(line[line.index($0.lowerBound, offsetBy: 3)...]) }
        }
    }

    /// SIGKILL: a child spawned from a test thread inherits that thread's signal mask,
    /// in which SIGTERM is blocked, and tinyproxy then never sees it. Its log is
    /// written line by line, so nothing a test reads is lost.
    public func stop() {
        guard let process = processHolder else { return }
        processHolder = nil
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }

    public struct StartError: Error, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }
}
