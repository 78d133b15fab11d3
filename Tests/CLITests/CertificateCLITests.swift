import APNsMock
import Foundation
import Testing
import TestSupport

/// `apns-send --certificate FILE.p12|FILE.pem [--certificate-password-file F]`:
/// certificate-based trust (APNS-PROTOCOL.md, "Certificate-based trust") end to end,
/// against a mock that asks for client certificates, over real TLS.
@Suite struct CertificateCLITests {
    static let certs = ClientPKI.shared

    static func mock(sandbox: Bool = true) throws -> MockServer {
        try CLI.mock {
            $0.clientCA = CLI.pki.caFile
            $0.sandbox = sandbox
        }
    }

    static func certificate(_ name: String, password: Bool = false) -> [String] {
        ["--certificate", certs.path(name)] + (password ? ["--certificate-password-file", certs.passwordFile] : [])
    }

    static func send(_ mock: MockServer, _ credentials: [String], tokens: [String], extra: [String] = []) async -> ProcessResult {
        let scratch = Scratch()
        return await CLI.run(["--topic", CLI.pki.topic] + credentials + CLI.endpoint(mock) + extra
                             + [CLI.payload, scratch.file("t.txt", tokens.joined(separator: "\n"))])
    }

    /// "With certificate auth there is no authorization header."
    @Test(arguments: ["nghttp2", "curl"])
    func aP12WithItsPasswordFileDeliversEveryToken(transport: String) async throws {
        let mock = try Self.mock()
        let tokens = CLI.tokens(50)
        let r = await Self.send(mock, Self.certificate("sandbox.p12", password: true), tokens: tokens,
                                extra: ["--transport", transport])
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == tokens.count)
        #expect(records.allSatisfy { $0.status == 200 && $0.hasContractKeyOrder })
        #expect(mock.recordedRequests().allSatisfy { $0.header("authorization") == nil })
        #expect(!r.stderr.contains(Self.certs.password))
    }

    @Test func aPEMWithCertificateAndKeyDelivers() async throws {
        let mock = try Self.mock(sandbox: false)
        let r = await Self.send(mock, Self.certificate("production.pem"), tokens: CLI.tokens(3))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Record.parse(r.stdout).map(\.status) == [200, 200, 200])
    }

    @Test func theConfigFileNamesTheCertificateAndItsPasswordFile() async throws {
        let mock = try Self.mock()
        let scratch = Scratch()
        let config = scratch.file("apns.env", """
            APNS_CERTIFICATE_PATH=\(Self.certs.path("sandbox.p12"))
            APNS_CERTIFICATE_PASSWORD_FILE=\(Self.certs.passwordFile)
            APNS_TOPIC=\(CLI.pki.topic)
            """)
        // The environment's provider key loses to the file's certificate: the first source that names credentials decides.
        let r = await CLI.run(["--config", config] + CLI.endpoint(mock)
                              + [CLI.payload, scratch.file("t.txt", CLI.tokens(2).joined(separator: "\n"))],
                              environment: ["APNS_KEY_PATH": CLI.pki.keyPath, "APNS_KEY_ID": CLI.pki.keyID,
                                            "APNS_TEAM_ID": CLI.pki.teamID])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(mock.recordedRequests().allSatisfy { $0.header("authorization") == nil })
    }

    /// "A certificate for the sandbox used on production gives 403 BadCertificateEnvironment":
    /// every token gets its record, none is retried.
    @Test func aSandboxCertificateOnProductionGivesEveryTokenARecord() async throws {
        let mock = try Self.mock(sandbox: false)
        let tokens = CLI.tokens(5)
        let r = await Self.send(mock, Self.certificate("sandbox.pem"), tokens: tokens)
        #expect(r.status == 1)
        let records = try Record.parse(r.stdout)
        #expect(records.count == tokens.count)
        #expect(records.allSatisfy { $0.status == 403 && $0.reason == "BadCertificateEnvironment" && $0.attempts == 1 })
    }

    // MARK: - One clear line, exit 2, nothing sent, never the password

    struct Refusal: Sendable, CustomStringConvertible {
        let name: String
        let arguments: [String]
        let says: String
        var description: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(name: "wrong password", arguments: ["--certificate", certs.path("sandbox.p12"),
                                                    "--certificate-password-file", certs.wrongPasswordFile],
                says: "wrong password"),
        Refusal(name: "no password", arguments: ["--certificate", certs.path("sandbox.p12")], says: "password-protected"),
        Refusal(name: "wrong PEM key password", arguments: ["--certificate", certs.path("encrypted.pem"),
                                                            "--certificate-password-file", certs.wrongPasswordFile],
                says: "wrong password"),
        Refusal(name: "expired", arguments: ["--certificate", certs.path("expired.p12"),
                                             "--certificate-password-file", certs.passwordFile], says: "expired on"),
        Refusal(name: "key mismatch", arguments: ["--certificate", certs.path("mismatch.pem")], says: "does not match"),
        Refusal(name: "unreadable", arguments: ["--certificate", "/nonexistent/push.p12"], says: "cannot read"),
        Refusal(name: "unreadable password file", arguments: ["--certificate", certs.path("sandbox.p12"),
                                                              "--certificate-password-file", "/nonexistent/pass.txt"],
                says: "/nonexistent/pass.txt"),
        Refusal(name: "certificate and key", arguments: ["--certificate", certs.path("sandbox.pem")] + CLI.credentials(),
                says: "not both"),
        Refusal(name: "password without certificate", arguments: ["--certificate-password-file", certs.passwordFile],
                says: "needs --certificate"),
    ]

    @Test(arguments: refusals)
    func aCertificateProblemIsOneLineAndExit2(refusal: Refusal) async throws {
        let mock = try Self.mock()
        let r = await Self.send(mock, refusal.arguments, tokens: CLI.tokens(3))
        #expect(r.status == 2)
        let lines = CLI.lines(r.stderr)
        #expect(lines.count == 1, "\(r.stderr)")
        #expect(lines.first?.contains(refusal.says) == true, "\(r.stderr)")
        #expect(!r.stderr.contains(Self.certs.password) && !r.stderr.contains("wrong horse"))
        #expect(r.stdout.isEmpty)
        #expect(mock.statistics().streams == 0, "nothing sent")
    }

    @Test func aDryRunDescribesTheCertificate() async throws {
        let mock = try Self.mock()
        let r = await Self.send(mock, Self.certificate("sandbox.p12", password: true), tokens: CLI.tokens(2),
                                extra: ["--dry-run"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("TLS client certificate for \(CLI.pki.topic) (sandbox"))
        #expect(mock.statistics().streams == 0)
    }
}
