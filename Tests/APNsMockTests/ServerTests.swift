import APNsMock
import Foundation
import Testing
import TestSupport

/// The connection level: TLS and ALPN, loopback only, sandbox answers, statistics, errors.
@Suite struct ServerTests {
    @Test("200 carries apns-id, and apns-unique-id in the development environment only")
    func success() throws {
        let sandbox = try Fixture.mock { $0.sandbox = true }
        let a = curl(sandbox.port)
        #expect(a.status == 200)
        #expect(a.body.isEmpty)
        #expect(a.headers["apns-id"]?.count == 36)
        #expect(a.headers["apns-unique-id"]?.count == 36)
        let production = try Fixture.mock()
        let b = curl(production.port)
        #expect(b.status == 200)
        #expect(b.headers["apns-unique-id"] == nil)
        #expect(b.headers["apns-id"]?.range(of: "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                                             options: .regularExpression) != nil)
    }

    @Test("\"TLS 1.2+, ALPN h2, HTTP/2 only\": a client without h2 has its handshake refused")
    func alpnRequired() throws {
        let mock = try Fixture.mock()
        let r = runSync("/usr/bin/curl", ["-sS", "--http1.1", "--cacert", Fixture.pki.caFile,
                                          "https://127.0.0.1:\(mock.port)/3/device/\(Fixture.token)"])
        #expect(r.status == 35)     // curl: TLS handshake failed
        #expect(r.stderr.contains("no application protocol"))
        let tls11 = runSync("/usr/bin/curl", ["-sS", "--http2", "--tlsv1.1", "--tls-max", "1.1",
                                              "--cacert", Fixture.pki.caFile, "https://127.0.0.1:\(mock.port)/"])
        #expect(tls11.status != 0)
        #expect(mock.statistics(once: { $0.handshakesFailed >= 2 }).handshakesFailed == 2)
    }

    @Test("The mock refuses to bind anything but loopback unless allowed")
    func loopbackOnly() throws {
        #expect(throws: MockError.self) { try Fixture.mock { $0.host = "0.0.0.0" } }
        let v6 = try Fixture.mock { $0.host = "::1" }
        #expect(v6.port != 0)
    }

    @Test("Start-up errors name their cause")
    func clearErrors() throws {
        do {
            _ = try Fixture.mock { $0.authKeys = ["KEY": "/nonexistent/AuthKey_KEY.p8"] }
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("/nonexistent/AuthKey_KEY.p8"))
        }
        do {
            _ = try Fixture.mock { $0.authKeys = ["KEY": Fixture.pki.caFile] }   // a certificate, not a key
            Issue.record("expected an error")
        } catch {
            #expect("\(error)".contains("not an EC P-256 key"))
        }
    }

    @Test("Statistics count connections, streams, statuses, reasons and bytes; stop is idempotent")
    func statistics() throws {
        let mock = try Fixture.mock()
        _ = curl(mock.port, [Request(), Request().with("apns-topic", nil)])
        let s = mock.statisticsWhenIdle()
        #expect(s.connectionsAccepted == 1)
        #expect(s.connectionsCurrent == 0)
        #expect(s.streams == 2)
        #expect(s.requests == 2)
        #expect(s.byStatus == [200: 1, 400: 1])
        #expect(s.byReason == ["MissingTopic": 1])
        #expect(s.maxConcurrentStreamsSeen == 1)
        #expect(s.bytesIn > 0 && s.bytesOut > 0)
        let json = try JSONSerialization.jsonObject(with: Data(mock.statisticsJSON().utf8)) as? [String: Any]
        #expect((json?["by_reason"] as? [String: Int])?["MissingTopic"] == 1)
        mock.stop()
        mock.stop()
        #expect(mock.statistics().requests == 0)
    }

    @Test("Several loop threads share the port")
    func threads() throws {
        let mock = try Fixture.mock { $0.threads = 2 }
        for _ in 0..<4 { #expect(curl(mock.port).status == 200) }
        #expect(mock.statistics().connectionsAccepted == 4)
    }
}
