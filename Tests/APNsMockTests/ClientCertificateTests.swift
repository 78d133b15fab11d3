import APNsMock
import Foundation
import Testing
import TestSupport

/// The mock's certificate-based trust (APNS-PROTOCOL.md, "Certificate-based trust"),
/// driven by curl's own TLS client certificate code, so no line of ours is on the
/// client side: which certificates it trusts, the topic it takes from the UID, and
/// where it answers BadCertificate, BadCertificateEnvironment and TopicDisallowed.
@Suite struct ClientCertificateTests {
    static let certs = ClientPKI.shared

    static func mock(sandbox: Bool = true, _ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        try Fixture.mock {
            $0.clientCA = Fixture.pki.caFile
            $0.sandbox = sandbox
            $0.topics = [Fixture.pki.topic, certs.otherTopic, certs.extraTopic]
            tweak(&$0)
        }
    }

    /// A request without a provider token, presenting `cert` (a PEM with its key).
    static func send(_ port: UInt16, cert: String?, _ request: Request = Request().with("authorization", nil)) -> Answer {
        let extra = cert.map { ["--cert", certs.path($0), "--key", certs.path($0)] } ?? []
        let (answers, _) = curl(port, [request], extra: extra)
        return answers.first ?? Answer(status: 0, headers: [:], body: "")
    }

    @Test("With certificate auth there is no authorization header: the TLS client certificate identifies the app")
    func aTrustedCertificateWithoutATokenIsDelivered() throws {
        let mock = try Self.mock()
        #expect(Self.send(mock.port, cert: "sandbox.pem").status == 200)
        #expect(mock.statistics().distinctJWTs == 0)
    }

    @Test("Its subject UID is the bundle id and it also covers <bundle>.voip and <bundle>.complication")
    func theUIDAndItsVoipAndComplicationTopicsAreCovered() throws {
        let mock = try Self.mock()
        let topic = Fixture.pki.topic
        let voip = Request().with("authorization", nil).with("apns-topic", topic + ".voip").with("apns-push-type", "voip")
        let complication = Request().with("authorization", nil).with("apns-topic", topic + ".complication")
            .with("apns-push-type", "complication")
        #expect(Self.send(mock.port, cert: "sandbox.pem", voip).status == 200)
        #expect(Self.send(mock.port, cert: "sandbox.pem", complication).status == 200)
    }

    @Test("A topic it does not cover is 400 TopicDisallowed")
    func anotherAppsTopicIsTopicDisallowed() throws {
        let mock = try Self.mock()
        let answer = Self.send(mock.port, cert: "sandbox.pem", Request().with("authorization", nil)
            .with("apns-topic", Self.certs.otherTopic))
        #expect(answer.status == 400)
        #expect(answer.reason == "TopicDisallowed")
        // ...and the other app's certificate is refused the first app's topic.
        let other = Self.send(mock.port, cert: "other.pem")
        #expect(other.status == 400)
        #expect(other.reason == "TopicDisallowed")
    }

    @Test("Universal certificates list topics in the extension 1.2.840.113635.100.6.3.6")
    func theTopicExtensionIsRead() throws {
        let mock = try Self.mock(sandbox: false)
        let extra = Request().with("authorization", nil).with("apns-topic", Self.certs.extraTopic)
        #expect(Self.send(mock.port, cert: "universal.pem", extra).status == 200)
        #expect(Self.send(mock.port, cert: "sandbox.pem", extra).reason == "BadCertificateEnvironment")
    }

    @Test("Without apns-topic the certificate's subject is the topic, unless it lists several")
    func theDefaultTopicIsTheUID() throws {
        let mock = try Self.mock(sandbox: false)
        let noTopic = Request().with("authorization", nil).with("apns-topic", nil)
        #expect(Self.send(mock.port, cert: "production.pem", noTopic).status == 200)
        let multi = Self.send(mock.port, cert: "universal.pem", noTopic)
        #expect(multi.status == 400)
        #expect(multi.reason == "MissingTopic")
    }

    @Test("A certificate for the sandbox used on production gives 403 BadCertificateEnvironment, and the reverse")
    func theEnvironmentMarkerMustFit() throws {
        let production = try Self.mock(sandbox: false)
        let a = Self.send(production.port, cert: "sandbox.pem")
        #expect(a.status == 403)
        #expect(a.reason == "BadCertificateEnvironment")
        let sandbox = try Self.mock(sandbox: true)
        let b = Self.send(sandbox.port, cert: "production.pem")
        #expect(b.status == 403)
        #expect(b.reason == "BadCertificateEnvironment")
    }

    @Test("An unusable certificate is 403 BadCertificate: another CA's, expired, or not for push at all",
          arguments: ["wrongca.pem", "expired.pem", "unmarked.pem"])
    func unusableCertificatesAreBadCertificate(name: String) throws {
        let mock = try Self.mock()
        let answer = Self.send(mock.port, cert: name)
        #expect(answer.status == 403)
        #expect(answer.reason == "BadCertificate")
    }

    @Test("An authorization header sent together with a client certificate: APNs ignores the cert and uses the token")
    func aTokenWinsOverTheCertificate() throws {
        let mock = try Self.mock()
        // The certificate would be refused (another CA's; another app's); the good token is judged instead.
        #expect(Self.send(mock.port, cert: "wrongca.pem", Request()).status == 200)
        #expect(Self.send(mock.port, cert: "other.pem", Request()).status == 200)
        // ...and a bad token is refused as a token, whatever the certificate.
        let bad = Self.send(mock.port, cert: "sandbox.pem", Request().with("authorization", "bearer not.a.jwt"))
        #expect(bad.status == 403)
        #expect(bad.reason == "InvalidProviderToken")
    }

    @Test("Neither a certificate nor a token is 403 MissingProviderToken")
    func neitherIsMissingProviderToken() throws {
        let mock = try Self.mock()
        let answer = Self.send(mock.port, cert: nil)
        #expect(answer.status == 403)
        #expect(answer.reason == "MissingProviderToken")
    }

    @Test("A mock without a client CA asks for no certificate: only tokens count")
    func withoutAClientCAThereIsNoCertificateAuth() throws {
        let mock = try Fixture.mock { $0.sandbox = true }
        let answer = Self.send(mock.port, cert: "sandbox.pem")
        #expect(answer.status == 403)
        #expect(answer.reason == "MissingProviderToken")
    }

    @Test("An unreadable client CA stops the mock at start with one line")
    func anUnreadableClientCAIsAStartError() throws {
        #expect {
            _ = try Fixture.mock { $0.clientCA = "/nonexistent/ca.pem" }
        } throws: { error in
            "\(error)".contains("client CA") && "\(error)".contains("/nonexistent/ca.pem")
        }
    }

    @Test("apns-mock --client-ca serves certificate auth")
    func theExecutableTakesAClientCA() async throws {
        let pki = Fixture.pki
        #expect(runSync(Package.executable("apns-mock"), ["--help"]).stdout.contains("--client-ca"))
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: Package.executable("apns-mock"))
        process.arguments = ["--port", "0", "--cert", pki.serverCertificate, "--key", pki.serverKey,
                             "--topic", pki.topic, "--sandbox", "--client-ca", pki.caFile]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        let port = try #require(UInt16(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        let answers = await Task.detached { (Self.send(port, cert: "sandbox.pem"), Self.send(port, cert: "wrongca.pem")) }.value
        #expect(answers.0.status == 200)
        #expect(answers.1.reason == "BadCertificate")
        process.terminate()
        await Task.detached { process.waitUntilExit() }.value
    }
}
