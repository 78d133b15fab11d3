import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket bound to a port of the kernel's choice on 127.0.0.1, not yet listening.
public func boundLoopbackSocket() -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return (fd, UInt16(bigEndian: addr.sin_port))
}

/// A port nothing listens on right now (the kernel's pick; a tiny race is acceptable in tests).
public func freePort() -> UInt16 {
    let (fd, port) = boundLoopbackSocket()
    close(fd)
    return port
}

/// A loopback port that refuses connections for as long as this object lives: bound,
/// never listening, so no other test's server can be handed the same port meanwhile
/// (a port from `freePort()` can be, when tests run side by side). Keep it alive to
/// the end of the test: `defer { withExtendedLifetime(closed) {} }`.
public final class ClosedPort: @unchecked Sendable {
    public let port: UInt16
    private let fd: Int32

    public init() {
        (fd, port) = boundLoopbackSocket()
    }

    deinit { close(fd) }
}

/// True once something accepts TCP connections on 127.0.0.1:port.
public func canConnect(_ port: UInt16) -> Bool {
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

/// The TCP ports process `pid` listens on, read from /proc: its socket inodes
/// (/proc/PID/fd links "socket:[INODE]") matched with LISTEN rows (state 0A) of
/// /proc/PID/net/tcp and tcp6. A server told to listen on port 0 is found this way
/// without trusting a port picked beforehand, which another test's server may
/// take first when tests run side by side.
public func listeningPorts(pid: Int32) -> [UInt16] {
    let fdDirectory = "/proc/\(pid)/fd"
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: fdDirectory) else { return [] }
    var inodes: Set<Substring> = []
    for entry in entries {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(fdDirectory)/\(entry)"),
              target.hasPrefix("socket:[") else { continue }
        inodes.insert(target.dropFirst("socket:[".count).dropLast())
    }
    var ports: [UInt16] = []
    for table in ["tcp", "tcp6"] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/net/\(table)", encoding: .utf8) else { continue }
        // "sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ..."
        for row in text.split(separator: "\n").dropFirst() {
            let fields = row.split(separator: " ")
            guard fields.count > 9, fields[3] == "0A", inodes.contains(fields[9]),
                  let hexPort = fields[1].split(separator: ":").last, let port = UInt16(hexPort, radix: 16)
            else { continue }
            ports.append(port)
        }
    }
    return ports
}
