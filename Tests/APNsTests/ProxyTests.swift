import APNsMock
import Foundation
import TestSupport
import Synchronization
import Testing
@testable import APNs
#if canImport(Glibc)
import Glibc
#endif

/// HTTP CONNECT through a real proxy process (tinyproxy on loopback, started per test)
/// to the mock over real TLS, on both transports. APNS-PROTOCOL.md, "HTTP CONNECT
/// proxy": a 2xx answer opens the tunnel; TLS to APNs runs end to end inside it; any
/// other answer is a refusal, and every request ends with status 0 and an error that
/// names the proxy and its answer, without a hang.
@Suite struct ProxyTests {
    // MARK: - Through the proxy

    @Test(arguments: Transport.allCases)
    func sendsGoThroughTheProxyAndNowhereElse(transport: Transport) async throws {
        let mock = try Harness.mock()
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(proxy.port)))
        let tokens = Harness.tokens(300)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 200 })
        let connects = proxy.connectRequests
        #expect(!connects.isEmpty, "\(proxy.log)")
        #expect(connects.allSatisfy { $0 == "CONNECT 127.0.0.1:\(mock.port) HTTP/1.1" }, "\(connects)")
        // Every connection the mock accepted was one the proxy opened for a CONNECT.
        #expect(UInt64(connects.count) == mock.statistics().connectionsAccepted)
        #expect(mock.statistics().byStatus[200] ?? 0 >= UInt64(tokens.count))
    }

    /// A proxy named by host name goes through the same resolution and address
    /// fallback as an endpoint (localhost: ::1 first, where tinyproxy does not listen),
    /// and every connection of several gets a tunnel of its own.
    @Test(arguments: Transport.allCases)
    func aProxyByHostNameAndSeveralConnections(transport: Transport) async throws {
        let mock = try Harness.mock()
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport, connections: 2,
                                             proxy: Proxy(url: "http://localhost:\(proxy.port)"))
        let tokens = Harness.tokens(500)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count && results.allSatisfy { $0.status == 200 }, "\(Set(results.map(\.error)))")
        #expect(!proxy.connectRequests.isEmpty)
        #expect(UInt64(proxy.connectRequests.count) == mock.statistics().connectionsAccepted)
    }

    /// Basic credentials from the URL, percent-decoded ("%33" is "3").
    @Test(arguments: Transport.allCases)
    func basicCredentialsOpenTheTunnel(transport: Transport) async throws {
        let mock = try Harness.mock()
        let proxy = try Tinyproxy(connectPorts: [mock.port], basicAuth: ("apns", "s3cret"))
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport,
                                             proxy: Proxy(url: "http://apns:s%33cret@127.0.0.1:\(proxy.port)"))
        let tokens = Harness.tokens(50)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count && results.allSatisfy { $0.status == 200 })
        #expect(!proxy.connectRequests.isEmpty)
    }

    /// The tunnel carries TLS with the APNs host, not with the proxy: a server the
    /// client does not trust is refused inside it, exactly as without a proxy.
    @Test(arguments: Transport.allCases)
    func verificationStaysOnInsideTheTunnel(transport: Transport) async throws {
        let mock = try Harness.mock()
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport, caFile: nil,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(proxy.port)))
        let tokens = Harness.tokens(5)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 0 && ($0.error ?? "").contains("certificate") }, "\(results.map(\.error))")
        #expect(!proxy.connectRequests.isEmpty, "the tunnel was opened; TLS failed inside it")
        #expect(mock.statistics(once: { $0.handshakesFailed >= 1 }).handshakesFailed >= 1)
        #expect(mock.statistics().streams == 0)
    }

    /// A name the certificate carries (localhost), reached through the tunnel: SNI and
    /// the name check use the APNs host, never the proxy's address.
    @Test(arguments: Transport.allCases)
    func theCertificateIsCheckedAgainstTheAPNsHostName(transport: Transport) async throws {
        let mock = try Harness.mock()
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, host: "localhost", transport: transport,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(proxy.port)))
        let result = try await client.send(Harness.notification(), to: Harness.tokens(1)[0])
        await client.shutdown()

        #expect(result.status == 200, "\(result.error ?? "")")
        #expect(proxy.connectRequests.allSatisfy { $0 == "CONNECT localhost:\(mock.port) HTTP/1.1" })
    }

    /// The answer to CONNECT arriving a byte at a time, its blank line split across
    /// reads, in CRLF or bare-LF form: the tunnel reader takes exactly the header block
    /// and TLS starts on what follows.
    @Test(arguments: Transport.allCases, ["HTTP/1.1 200 Connection established\r\nProxy-agent: test\r\n\r\n",
                                          "HTTP/1.0 200 OK\n\n"])
    func anAnswerTrickledByteByByteStillOpensTheTunnel(transport: Transport, answer: String) async throws {
        let mock = try Harness.mock()
        let proxy = try TricklingProxy(answer: answer)
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(proxy.port)))
        let tokens = Harness.tokens(20)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count && results.allSatisfy { $0.status == 200 }, "\(Set(results.map(\.error)))")
        #expect(proxy.tunnels >= 1)
    }

    /// A proxy whose answer never ends is cut off at the answer bound, not read forever.
    @Test func anEndlessAnswerIsRefusedAtItsBound() async throws {
        let mock = try Harness.mock()
        let proxy = try TricklingProxy(answer: "HTTP/1.1 200 OK\r\n" + String(repeating: "X-Pad: 0123456789abcdef\r\n", count: 400),
                                       bytesPerWrite: 4096)
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: .nghttp2,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(proxy.port)))
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(3))
        await client.shutdown()
        #expect(results.allSatisfy { ($0.error ?? "").hasSuffix("proxy 127.0.0.1:\(proxy.port): its answer to CONNECT has no end within 8192 bytes") },
                "\(Set(results.map(\.error)))")
    }

    // MARK: - Refusals: status 0 for every token, the proxy and its answer named

    /// tinyproxy 1.11.1's refusals (seen by running it): 407 without credentials, 401
    /// with wrong ones, 403 for a port outside its ConnectPort list.
    enum Refusal: String, CaseIterable, Sendable {
        case noCredentials, wrongCredentials, portNotAllowed
    }

    @Test(arguments: Transport.allCases, Refusal.allCases)
    func aRefusingProxyEndsEveryTokenWithStatusZeroNamingIt(transport: Transport, refusal: Refusal) async throws {
        let mock = try Harness.mock()
        let proxy: Tinyproxy, url: String, answer: String
        switch refusal {
        case .noCredentials:
            proxy = try Tinyproxy(connectPorts: [mock.port], basicAuth: ("apns", "s3cret"))
            url = "http://127.0.0.1:\(proxy.port)"
            answer = "407 Proxy Authentication Required"
        case .wrongCredentials:
            proxy = try Tinyproxy(connectPorts: [mock.port], basicAuth: ("apns", "s3cret"))
            url = "http://apns:hunter2@127.0.0.1:\(proxy.port)"
            answer = "401 Unauthorized"
        case .portNotAllowed:
            proxy = try Tinyproxy(connectPorts: [443])
            url = "http://127.0.0.1:\(proxy.port)"
            answer = "403 Access violation"
        }
        defer { proxy.stop() }
        let client = try ProxyHarness.client(mock.port, transport: transport, proxy: Proxy(url: url))
        let tokens = Harness.tokens(40)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        let expected = "127.0.0.1:\(mock.port): proxy 127.0.0.1:\(proxy.port) refused CONNECT: \(answer)"
        #expect(results.allSatisfy { $0.status == 0 && $0.error == expected }, "\(Set(results.map(\.error)))")
        #expect(results.allSatisfy { !($0.error ?? "").contains("hunter2") })
        #expect(!proxy.connectRequests.isEmpty)
        #expect(mock.statistics().connectionsAccepted == 0, "the proxy never opened the tunnel")
    }

    @Test(arguments: Transport.allCases)
    func aDeadProxyIsUnreachableAndNamed(transport: Transport) async throws {
        let mock = try Harness.mock()
        let dead = ClosedPort()
        defer { withExtendedLifetime(dead) {} }
        let client = try ProxyHarness.client(mock.port, transport: transport,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(dead.port)))
        let tokens = Harness.tokens(10)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 0 && ($0.error ?? "").contains("proxy 127.0.0.1:\(dead.port)") },
                "\(Set(results.map(\.error)))")
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    /// A proxy that accepts the connection and never answers CONNECT: the connect
    /// timeout ends it, every token gets its record.
    @Test(arguments: Transport.allCases)
    func aSilentProxyTimesOutInsteadOfHanging(transport: Transport) async throws {
        let mock = try Harness.mock()
        let silent = SilentPort()
        defer { withExtendedLifetime(silent) {} }
        let client = try ProxyHarness.client(mock.port, transport: transport, connectTimeout: .milliseconds(500),
                                             proxy: Proxy(host: "127.0.0.1", port: Int(silent.port)))
        let tokens = Harness.tokens(10)
        let results = await client.sendAll(Harness.notification(), to: tokens)
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0.status == 0 && ($0.error ?? "").contains("proxy 127.0.0.1:\(silent.port)") },
                "\(Set(results.map(\.error)))")
        if transport == .nghttp2 {
            #expect(results.allSatisfy { ($0.error ?? "").contains("did not answer CONNECT within 500 ms") })
        }
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    /// The bypass list decides per endpoint: a dead proxy is never tried for a host it names.
    @Test(arguments: Transport.allCases)
    func aBypassedEndpointIsReachedDirectly(transport: Transport) async throws {
        let mock = try Harness.mock()
        let dead = ClosedPort()
        defer { withExtendedLifetime(dead) {} }
        let client = try ProxyHarness.client(mock.port, transport: transport,
                                             proxy: Proxy(host: "127.0.0.1", port: Int(dead.port),
                                                          bypass: NoProxy("example.com, 127.0.0.1")))
        let results = await client.sendAll(Harness.notification(), to: Harness.tokens(5))
        await client.shutdown()
        #expect(results.allSatisfy { $0.status == 200 })
    }

    /// Fields the C side would put in a header are checked there too (the library
    /// refuses them earlier, in `Proxy(url:)`, but `Proxy` can be built field by field).
    @Test(arguments: Transport.allCases)
    func aControlCharacterInTheCredentialsIsRefusedAtStart(transport: Transport) throws {
        #expect(throws: APNsError.self) {
            _ = try ProxyHarness.client(1, transport: transport,
                                        proxy: Proxy(host: "127.0.0.1", port: 3128, username: "u", password: "a\r\nX-Evil: 1"))
        }
    }
}

enum ProxyHarness {
    static func client(_ port: UInt16, host: String = "127.0.0.1", transport: Transport,
                       caFile: String? = TestPKI.shared.caFile, connectTimeout: Duration = .seconds(5),
                       connections: Int = 1, proxy: Proxy) throws -> APNsClient {
        let pki = TestPKI.shared
        let credentials = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        var c = APNsClient.Configuration(
            credentials: credentials, environment: .custom(host: host, port: Int(port)), caFile: caFile,
            transport: transport, connections: connections, connectTimeout: connectTimeout, requestTimeout: .seconds(20),
            retry: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(100)))
        c.proxy = proxy
        return try APNsClient(configuration: c)
    }
}

/// A hand-made CONNECT proxy that writes its answer slowly, `bytesPerWrite` at a time,
/// then relays both ways: for the tunnel reader's partial reads. Loopback only; it
/// sends with MSG_NOSIGNAL, as a peer that hangs up must not SIGPIPE the test process.
final class TricklingProxy: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let answer: [UInt8]
    private let bytesPerWrite: Int
    private let count = Mutex(0)

    /// Tunnels answered so far.
    var tunnels: Int { count.withLock { $0 } }

    init(answer: String, bytesPerWrite: Int = 1) throws {
        self.answer = Array(answer.utf8)
        self.bytesPerWrite = bytesPerWrite
        let (listener, bound) = boundLoopbackSocket()
        self.listener = listener
        guard listen(listener, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
        port = bound
        Thread { [self] in
            while case let fd = accept(listener, nil, nil), fd >= 0 {
                Thread { self.serve(fd) }.start()
            }
        }.start()
    }

    /// Ends accepting (a shut-down listening socket fails accept); tunnels end with their peers.
    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ client: Int32) {
        var one: Int32 = 1
        setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual("\r\n\r\n".utf8) {
            guard read(client, &byte, 1) == 1 else { close(client); return }
            head.append(byte)
        }
        // "CONNECT host:port HTTP/1.1": the mock is on loopback whatever the host says.
        let line = String(decoding: head.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self).split(separator: " ")
        guard line.count == 3, let port = line[1].split(separator: ":").last.flatMap({ UInt16($0) }),
              let upstream = TricklingProxy.connect(port) else { close(client); return }
        var offset = 0
        while offset < answer.count {
            let n = min(bytesPerWrite, answer.count - offset)
            guard answer[offset...].withUnsafeBytes({ send(client, $0.baseAddress, n, Int32(MSG_NOSIGNAL)) }) == n else { break }
            offset += n
            usleep(1_000)
        }
        count.withLock { $0 += 1 }
        let done = DispatchGroup()
        done.enter()
        Thread {
            TricklingProxy.pump(from: client, to: upstream)
            done.leave()
        }.start()
        TricklingProxy.pump(from: upstream, to: client)
        done.wait()
        close(client)
        close(upstream)
    }

    private static func connect(_ port: UInt16) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        if !ok { close(fd) }
        return ok ? fd : nil
    }

    /// Copies until EOF or an error, then passes the EOF on.
    private static func pump(from: Int32, to: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            var sent = 0
            while sent < n {
                let w = buffer[sent..<n].withUnsafeBytes { send(to, $0.baseAddress, n - sent, Int32(MSG_NOSIGNAL)) }
                if w <= 0 { shutdown(to, Int32(SHUT_WR)); return }
                sent += w
            }
        }
        shutdown(to, Int32(SHUT_WR))
    }
}
