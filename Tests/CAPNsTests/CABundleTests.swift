import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// ca_file is trusted "on top of the system's" (capns.h), on both transports. The test
/// cannot add a CA to the machine's bundle, so it names this process's system bundle
/// the way OpenSSL lets a process do it, SSL_CERT_FILE (the nghttp2 transport's
/// SSL_CTX_set_default_verify_paths reads it; the curl transport reads the same file):
/// a second CA, which signed the mock's certificate here. ca_file is the test CA, which
/// did not. The request must verify through the "system" CA while ca_file is set:
/// with CURLOPT_CAINFO curl trusted ca_file instead of the system's bundle and failed.
@Suite(.serialized) struct CABundleTests {
    /// The "system" CA and a mock certificate it signed for 127.0.0.1; SSL_CERT_FILE set once.
    static let systemSigned: (ca: String, key: String, certificate: String)? = {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("capns-sysca-\(UUID())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let ca = runSync("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=stand-in system CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign", "-keyout", dir + "/ca.key", "-out", dir + "/ca.crt"])
        let leaf = runSync("/usr/bin/openssl", [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1",
            "-subj", "/CN=mock", "-addext", "subjectAltName=IP:127.0.0.1",
            "-addext", "basicConstraints=critical,CA:FALSE", "-addext", "extendedKeyUsage=serverAuth",
            "-CA", dir + "/ca.crt", "-CAkey", dir + "/ca.key", "-keyout", dir + "/srv.key", "-out", dir + "/srv.crt"])
        guard ca.status == 0, leaf.status == 0 else { return nil }
        setenv("SSL_CERT_FILE", dir + "/ca.crt", 1)
        return (dir + "/ca.crt", dir + "/srv.key", dir + "/srv.crt")
    }()

    @Test("A server signed by a system CA verifies while ca_file names another CA", arguments: Transport.allCases)
    func systemAndExtra(transport: Transport) async throws {
        let signed = try #require(Self.systemSigned, "openssl could not make the stand-in system CA")
        let cert = strdup(signed.certificate)!, key = strdup(signed.key)!
        defer { free(cert); free(key) }
        let mock = try InProcessMock { cfg in
            cfg.cert_file = UnsafePointer(cert)
            cfg.key_file = UnsafePointer(key)
        }
        let sender = try TestSender(transport, port: mock.port, caFile: TestPKI.shared.caFile,
                                    topic: TestPKI.shared.topic, providerToken: try InProcessMock.providerToken())
        let (completions, _) = await sender.run(count: 2, seconds: 20)
        _ = await mock.stop()
        expectEachTagOnce(completions, 2)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 200 },
                "\(completions.map(\.error))")
    }

    @Test("ca_file alone still verifies the test CA's server", arguments: Transport.allCases)
    func extraOnly(transport: Transport) async throws {
        _ = Self.systemSigned
        let mock = try InProcessMock()
        let sender = try TestSender(transport, mock: mock)
        let (completions, _) = await sender.run(count: 2, seconds: 20)
        _ = await mock.stop()
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 200 },
                "\(completions.map(\.error))")
    }
}
