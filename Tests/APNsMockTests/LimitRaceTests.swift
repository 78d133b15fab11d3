import APNsMock
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// capns_mock_set_max_streams wakes each loop, which sends SETTINGS to every open
/// connection. A connection the client has reset fails that write and is closed and
/// freed there; its own socket event may sit later in the same epoll batch. This test
/// makes that happen many times: raised connections (one 200 each) held open by a
/// proxy, then in one breath a new limit and a TCP reset of all of them. Run under
/// AddressSanitizer (scripts/sanitize.sh), a use after free is a report; without it
/// the mock must at least keep serving and close every connection.
@Suite struct LimitRaceTests {
    @Test("Raising the stream limit while clients reset their connections")
    func raiseLimitWhileClientsReset() throws {
        let mock = try Fixture.mock()
        defer { mock.stop() }
        let proxy = try ResettingProxy(upstream: mock.port)
        defer { proxy.stop() }
        let rounds = 6, victims = 8
        for round in 0..<rounds {
            for _ in 0..<victims {
                #expect(curl(proxy.port).status == 200)
            }
            proxy.waitIdle(victims)
            proxy.resetAll { mock.setMaxStreams(500 + round) }
        }
        // The closes are asynchronous; a loaded machine takes its time with them.
        #expect(mock.statisticsWhenIdle(within: 120).connectionsCurrent == 0)
        #expect(mock.statistics().connectionsAccepted == UInt64(rounds * victims))
        HostileInputTests.expectStillServing(mock)
    }
}

/// A TCP relay to 127.0.0.1:upstream that keeps each upstream connection open after its
/// client left, so that the test can reset it (SO_LINGER 0: RST, not FIN) when it likes.
/// One thread per client relays with poll; no thread is ever blocked on an upstream
/// socket that resetAll closes.
final class ResettingProxy: @unchecked Sendable {
    let port: UInt16
    private let upstream: UInt16
    private let listenFD: Int32
    private let lock = NSLock()
    private var idle: [Int32] = []
    private var stopped = false

    init(upstream: UInt16) throws {
        self.upstream = upstream
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = Self.loopback(0)
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, len) == 0 && listen(fd, 64) == 0 && getsockname(fd, $0, &len) == 0
            }
        }
        listenFD = fd
        guard ok else { throw MockError.startFailed("proxy: cannot listen") }
        port = UInt16(bigEndian: addr.sin_port)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    static func loopback(_ port: UInt16) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return a
    }

    private func acceptLoop() {
        while true {
            let client = accept(listenFD, nil, nil)
            if client < 0 { return }        // stop() closed the listener
            let up = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = Self.loopback(upstream)
            let connected = withUnsafeMutablePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(up, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            guard connected else { close(client); close(up); continue }
            Thread.detachNewThread { [self] in relay(client, up) }
        }
    }

    /// Both ways until the client closes; the upstream socket is then kept, idle.
    private func relay(_ client: Int32, _ up: Int32) {
        var buf = [UInt8](repeating: 0, count: 65536)
        var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: up, events: Int16(POLLIN), revents: 0)]
        loop: while poll(&fds, 2, 1000) >= 0 {
            for (i, (from, to)) in [(client, up), (up, client)].enumerated() where fds[i].revents != 0 {
                let n = read(from, &buf, buf.count)
                if n <= 0 { break loop }
                var off = 0
                while off < n {
                    // MSG_NOSIGNAL: a peer gone must not raise SIGPIPE in the test process.
                    let w = buf[off..<n].withUnsafeBytes { send(to, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if w <= 0 { break loop }
                    off += w
                }
            }
        }
        close(client)
        lock.withLock { idle.append(up) }
    }

    func waitIdle(_ count: Int) {
        let deadline = Date().addingTimeInterval(120)
        while lock.withLock({ idle.count }) < count && Date() < deadline { usleep(2_000) }
    }

    /// Runs `before`, then resets every idle upstream connection at once.
    func resetAll(_ before: () -> Void) {
        let fds = lock.withLock { () -> [Int32] in
            defer { idle = [] }
            return idle
        }
        var lg = linger(l_onoff: 1, l_linger: 0)
        for fd in fds { setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, socklen_t(MemoryLayout<linger>.size)) }
        before()
        for fd in fds { close(fd) }
    }

    func stop() {
        let wasStopped = lock.withLock { () -> Bool in
            defer { stopped = true }
            return stopped
        }
        guard !wasStopped else { return }
        shutdown(listenFD, Int32(SHUT_RDWR))
        close(listenFD)
        resetAll {}
    }
}
