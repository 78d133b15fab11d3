import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// ca_file is trusted "on top of the system's" (capns.h), on both transports. The test
/// cannot add a CA to the machine's bundle, so it names a process's system bundle the
/// way OpenSSL lets a process do it, SSL_CERT_FILE (the nghttp2 transport reads it
/// when a chain first needs the system's roots; the curl transport reads the same
/// file): a second CA, which signed the mock's certificate here. ca_file (`--cacert`)
/// is the test CA, which did not. The request must verify through the "system" CA
/// while ca_file is set: with CURLOPT_CAINFO curl trusted ca_file instead of the
/// system's bundle and failed. The variable is given to an `apns-send` child only:
/// setting it in this process raced other tests' process spawns, which copy the
/// environment.
@Suite struct CABundleTests {
    /// The "system" CA and a mock certificate it signed for 127.0.0.1.
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
        return (dir + "/ca.crt", dir + "/srv.key", dir + "/srv.crt")
    }()

    /// `apns-send` with SSL_CERT_FILE naming the stand-in system CA and `--cacert`
    /// the test CA: two tokens to the mock, its records and exit status.
    static func send(port: UInt16, transport: Transport, systemCA: String,
                     timeout: TimeInterval = 60) async throws -> ProcessResult {
        let pki = TestPKI.shared
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("capns-sysca-run-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try #"{"aps":{"alert":"ca bundle"}}"#.write(toFile: dir + "/payload.json", atomically: true, encoding: .utf8)
        try (String(repeating: "a", count: 64) + "\n" + String(repeating: "b", count: 64) + "\n")
            .write(toFile: dir + "/tokens.txt", atomically: true, encoding: .utf8)
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_") && !$0.key.lowercased().hasSuffix("_proxy") }
        env["SSL_CERT_FILE"] = systemCA
        return await run(Package.executable("apns-send"), [
            "--topic", pki.topic, "--key", pki.keyPath, "--key-id", pki.keyID, "--team-id", pki.teamID,
            "--endpoint", "https://127.0.0.1:\(port)", "--cacert", pki.caFile,
            "--transport", transport.rawValue, dir + "/payload.json", dir + "/tokens.txt",
        ], environment: env, timeout: timeout)
    }

    @Test("A server signed by a system CA verifies while ca_file names another CA", arguments: Transport.allCases)
    func systemAndExtra(transport: Transport) async throws {
        let signed = try #require(Self.systemSigned, "openssl could not make the stand-in system CA")
        let cert = strdup(signed.certificate)!, key = strdup(signed.key)!
        defer { free(cert); free(key) }
        let mock = try InProcessMock { cfg in
            cfg.cert_file = UnsafePointer(cert)
            cfg.key_file = UnsafePointer(key)
        }
        let result = try await Self.send(port: mock.port, transport: transport, systemCA: signed.ca)
        _ = await mock.stop()
        #expect(result.status == 0, "\(result.stderr)")
        let records = result.stdout.split(separator: "\n")
        #expect(records.count == 2 && records.allSatisfy { $0.contains(#""status":200"#) }, "\(result.stdout)")
    }

    @Test("ca_file alone still verifies the test CA's server", arguments: Transport.allCases)
    func extraOnly(transport: Transport) async throws {
        let signed = try #require(Self.systemSigned, "openssl could not make the stand-in system CA")
        let mock = try InProcessMock()
        let result = try await Self.send(port: mock.port, transport: transport, systemCA: signed.ca)
        _ = await mock.stop()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2, "\(result.stdout)")
    }

    /// The nghttp2 transport reads the system's roots when a chain first needs them:
    /// parsing the whole bundle costs a start more than all the rest of it. Here the
    /// mock's chain ends at ca_file's CA, and the "system" bundle is a FIFO that no one
    /// writes: opening it to read blocks until the timeout kills the process.
    @Test("A chain that ca_file completes never reads the system's bundle")
    func systemRootsReadOnlyWhenNeeded() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("capns-fifo-\(UUID())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fifo = dir + "/bundle.pem"
        #expect(mkfifo(fifo, 0o600) == 0)
        let mock = try InProcessMock()
        let result = try await Self.send(port: mock.port, transport: .nghttp2, systemCA: fifo, timeout: 30)
        _ = await mock.stop()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2, "\(result.stdout)")
    }
}
