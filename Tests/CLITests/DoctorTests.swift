import APNsMock
import Foundation
import Testing
import TestSupport

/// `apns-send doctor` against the real mock: a healthy set-up prints only ✓ lines
/// and exits 0; each broken one prints the ✗ line that names it, with what to do,
/// and exits 1. No output ever carries the key or a provider token.
@Suite struct DoctorTests {
    struct Outcome {
        let status: Int32
        let lines: [String]
        let all: String

        /// The line of the check named `name` ("✓ TLS: ..." or "✗ TLS: ...").
        func line(_ name: String) -> String? {
            lines.first { $0.dropFirst(2).hasPrefix(name + ":") }
        }
    }

    static func doctor(_ mock: MockServer, _ extra: [String] = [], cacert: String = CLI.pki.caFile,
                       keyID: String = CLI.pki.keyID) async -> Outcome {
        let r = await CLI.run(["doctor", "--topic", CLI.pki.topic, "--key", CLI.pki.keyPath, "--key-id", keyID,
                               "--team-id", CLI.pki.teamID, "--endpoint", "https://127.0.0.1:\(mock.port)",
                               "--cacert", cacert, "--timeout", "20"] + extra)
        return Outcome(status: r.status, lines: CLI.lines(r.stdout), all: r.stdout + r.stderr)
    }

    /// Neither the key's PEM nor a JWT (base64url of '{"' starts with "eyJ") is ever printed.
    static func expectNoSecrets(_ o: Outcome) throws {
        #expect(!o.all.contains("eyJ"), "\(o.all)")
        let key = try String(contentsOfFile: CLI.pki.keyPath, encoding: .utf8)
        let body = key.split(separator: "\n").filter { !$0.hasPrefix("-----") }
        #expect(body.allSatisfy { !o.all.contains($0) }, "\(o.all)")
    }

    @Test func aHealthySetUpPassesEveryCheck() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let o = await Self.doctor(mock)
        #expect(o.status == 0, "\(o.all)")
        let checks = o.lines.filter { $0.hasPrefix("✓") || $0.hasPrefix("✗") }
        #expect(checks.count >= 8 && checks.allSatisfy { $0.hasPrefix("✓") }, "\(o.all)")
        for name in ["key file", "key permissions", "key id", "team id", "DNS 127.0.0.1", "TCP 127.0.0.1:\(mock.port)",
                     "TLS", "clock", "request"] {
            #expect(o.line(name)?.hasPrefix("✓") == true, "\(name) in \(o.all)")
        }
        // The chain the verifier built ends at the test CA, given by --cacert.
        #expect(o.line("TLS")?.contains("from --cacert \(CLI.pki.caFile)") == true, "\(o.all)")
        #expect(o.line("request")?.contains("BadDeviceToken") == true, "\(o.all)")
        // Exactly one request, to the all-zero token, which nobody has.
        let recorded = mock.recordedRequests()
        #expect(recorded.count == 1 && recorded.first?.path == "/3/device/" + String(repeating: "0", count: 64))
        try Self.expectNoSecrets(o)
    }

    @Test func aCAThatDoesNotMatchFailsTLS() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let other = scratch.path("other-ca.pem")
        let made = runSync("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                "-nodes", "-keyout", scratch.path("other-ca.key"), "-out", other,
                                                "-subj", "/CN=Some Other CA", "-days", "2"])
        #expect(made.status == 0, "\(made.stderr)")
        let o = await Self.doctor(mock, cacert: other)
        #expect(o.status == 1, "\(o.all)")
        let tls = try #require(o.line("TLS"), "\(o.all)")
        #expect(tls.hasPrefix("✗") && tls.contains("USERTrust") && tls.contains("--cacert"), "\(tls)")
        #expect(o.line("request")?.hasPrefix("✗") == true)
        #expect(mock.recordedRequests().isEmpty)
    }

    /// The mock's clock runs 2 h ahead: the token's iat is 2 h old by APNs' clock
    /// (403 ExpiredProviderToken), and the answer's date header tells by how much.
    @Test func aClockTwoHoursOffIsNamed() async throws {
        let mock = try CLI.mock { $0.clockOffset = .seconds(7200) }
        defer { mock.stop() }
        let o = await Self.doctor(mock)
        #expect(o.status == 1, "\(o.all)")
        let clock = try #require(o.line("clock"), "\(o.all)")
        #expect(clock.hasPrefix("✗") && clock.contains("behind APNs'") && clock.contains("NTP"), "\(clock)")
        // 2 h, give or take the seconds the run took.
        #expect(clock.contains("1 h 59 min") || clock.contains("2 h 0 min"), "\(clock)")
        #expect(o.line("request")?.contains("403 ExpiredProviderToken") == true, "\(o.all)")
        #expect(o.line("TLS")?.hasPrefix("✓") == true)
        try Self.expectNoSecrets(o)
    }

    /// APNs answers a revoked key as one it does not know: 403 InvalidProviderToken.
    /// The mock here knows only the test PKI's other key.
    @Test func aRevokedKeyIsRefused() async throws {
        let mock = try CLI.mock { $0.authKeys = [CLI.pki.otherKeyID: CLI.pki.otherKeyPath] }
        defer { mock.stop() }
        let o = await Self.doctor(mock)
        #expect(o.status == 1, "\(o.all)")
        let request = try #require(o.line("request"), "\(o.all)")
        #expect(request.hasPrefix("✗") && request.contains("403 InvalidProviderToken") && request.contains("revoked"),
                "\(request)")
        #expect(o.line("clock")?.hasPrefix("✓") == true, "\(o.all)")
    }

    /// A proxy that refuses the tunnel (tinyproxy allows CONNECT to another port only).
    @Test func aProxyThatRefusesIsNamed() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let proxy = try Tinyproxy(connectPorts: [mock.port &+ 1 == 0 ? 1 : mock.port &+ 1])
        defer { proxy.stop() }
        let o = await Self.doctor(mock, ["--proxy", "http://127.0.0.1:\(proxy.port)"])
        #expect(o.status == 1, "\(o.all)")
        #expect(o.line("TCP proxy 127.0.0.1:\(proxy.port)")?.hasPrefix("✓") == true, "\(o.all)")
        let line = try #require(o.line("proxy http://127.0.0.1:\(proxy.port)"), "\(o.all)")
        #expect(line.hasPrefix("✗") && line.contains("answered CONNECT with 403"), "\(line)")
        #expect(mock.recordedRequests().isEmpty)
    }

    /// A key restricted to sandbox, used on a production server.
    @Test func aKeyForTheOtherEnvironmentIsNamed() async throws {
        let mock = try CLI.mock { $0.keyEnvironments = [CLI.pki.keyID: .sandbox] }
        defer { mock.stop() }
        let o = await Self.doctor(mock)
        #expect(o.status == 1, "\(o.all)")
        let request = try #require(o.line("request"), "\(o.all)")
        #expect(request.hasPrefix("✗") && request.contains("403 BadEnvironmentKeyIdInToken")
                && request.contains("restricted to sandbox") && request.contains("--env sandbox"), "\(request)")
    }

    /// The key file's own checks: a key others may read, and a --key-id the file's name contradicts.
    @Test func keyFileProblemsAreNamed() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let key = scratch.file("AuthKey_\(CLI.pki.keyID).p8", try String(contentsOfFile: CLI.pki.keyPath, encoding: .utf8))
        chmod(key, 0o644)
        let r = await CLI.run(["doctor", "--topic", CLI.pki.topic, "--key", key, "--key-id", CLI.pki.otherKeyID,
                               "--team-id", CLI.pki.teamID] + CLI.endpoint(mock))
        let o = Outcome(status: r.status, lines: CLI.lines(r.stdout), all: r.stdout + r.stderr)
        #expect(o.status == 1, "\(o.all)")
        #expect(o.line("key file")?.hasPrefix("✓") == true, "\(o.all)")
        #expect(o.line("key permissions")?.contains("chmod 600") == true, "\(o.all)")
        #expect(o.line("key id")?.contains("named for key \(CLI.pki.keyID)") == true, "\(o.all)")
    }

    // MARK: - Certificate auth

    static func doctor(certificateMock mock: MockServer, _ credentials: [String]) async -> Outcome {
        let r = await CLI.run(["doctor", "--topic", CLI.pki.topic, "--env", "sandbox"] + credentials + CLI.endpoint(mock))
        return Outcome(status: r.status, lines: CLI.lines(r.stdout), all: r.stdout + r.stderr)
    }

    @Test func aHealthyCertificatePassesEveryCheck() async throws {
        let mock = try CertificateCLITests.mock(sandbox: true)
        defer { mock.stop() }
        let o = await Self.doctor(certificateMock: mock, CertificateCLITests.certificate("sandbox.p12", password: true))
        #expect(o.status == 0, "\(o.all)")
        for name in ["certificate", "certificate topic", "certificate environment", "TLS", "clock", "request"] {
            #expect(o.line(name)?.hasPrefix("✓") == true, "\(name) in \(o.all)")
        }
        #expect(o.line("certificate")?.contains("expires in") == true, "\(o.all)")
        #expect(o.line("request")?.contains("certificate") == true && o.line("request")?.contains("BadDeviceToken") == true)
        #expect(mock.recordedRequests().allSatisfy { $0.header("authorization") == nil })
        #expect(!o.all.contains(ClientPKI.shared.password))
    }

    /// A certificate of another app: its UID is not the topic, and APNs says so too.
    @Test func aCertificateForAnotherTopicIsNamed() async throws {
        let mock = try CertificateCLITests.mock(sandbox: true)
        defer { mock.stop() }
        let o = await Self.doctor(certificateMock: mock, CertificateCLITests.certificate("other.pem"))
        #expect(o.status == 1, "\(o.all)")
        let topic = try #require(o.line("certificate topic"), "\(o.all)")
        #expect(topic.hasPrefix("✗") && topic.contains("--topic \(ClientPKI.shared.otherTopic)"), "\(topic)")
        #expect(o.line("request")?.hasPrefix("✗") == true, "\(o.all)")
    }
}
