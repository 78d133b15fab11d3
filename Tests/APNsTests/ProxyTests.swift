import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

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
        #expect(mock.statistics().handshakesFailed >= 1)
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
        let silent = SilentProxy()
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
                       proxy: Proxy) throws -> APNsClient {
        let pki = TestPKI.shared
        let credentials = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        var c = APNsClient.Configuration(
            credentials: credentials, environment: .custom(host: host, port: Int(port)), caFile: caFile,
            transport: transport, connectTimeout: connectTimeout, requestTimeout: .seconds(20),
            retry: RetryPolicy(maxAttempts: 2, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(100)))
        c.proxy = proxy
        return try APNsClient(configuration: c)
    }
}
