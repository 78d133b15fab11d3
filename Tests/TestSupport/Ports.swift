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

/// A loopback port that takes connections and never says a word, for as long as this
/// object lives: listening, never accepting, so the kernel completes each TCP handshake
/// and nothing answers after it (no TLS, no protocol). What a timeout is tested on.
public final class SilentPort: @unchecked Sendable {
    public let port: UInt16
    private let fd: Int32

    public init() {
        (fd, port) = boundLoopbackSocket()
        listen(fd, 16)
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
