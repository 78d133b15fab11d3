import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// Certificate-based trust (APNS-PROTOCOL.md, "Certificate-based trust") through the
/// library, on both transports, against a mock that asks for client certificates and
/// trusts the test CA, over real TLS.
@Suite struct CertificateAuthTests {
    static let certs = ClientPKI.shared

    static func mock(sandbox: Bool, topics: [String] = [TestPKI.shared.topic]) throws -> MockServer {
        try Harness.mock {
            $0.clientCA = TestPKI.shared.caFile
            $0.sandbox = sandbox
            $0.topics = topics
            $0.recordRequests = true
        }
    }

    static func client(_ mock: MockServer, _ certificate: ClientCertificate, transport: Transport) throws -> APNsClient {
        try APNsClient(configuration: .init(
            credentials: .certificate(certificate), environment: .custom(host: "127.0.0.1", port: Int(mock.port)),
            caFile: TestPKI.shared.caFile, transport: transport, connectTimeout: .seconds(5),
            requestTimeout: .seconds(10), retry: Harness.retry))
    }

    static func send(_ certificate: ClientCertificate, sandbox: Bool, transport: Transport, topic: String = TestPKI.shared.topic,
                     pushType: PushType = .alert, count: Int = 1,
                     mockTopics: [String] = [TestPKI.shared.topic]) async throws -> ([DeliveryResult], MockServer) {
        let mock = try mock(sandbox: sandbox, topics: mockTopics)
        let client = try client(mock, certificate, transport: transport)
        let note = try Notification(topic: topic, pushType: pushType, payload: Harness.payload)
        let results = await client.sendAll(note, to: Harness.tokens(count))
        await client.shutdown()
        return (results, mock)
    }

    // MARK: - Delivered

    /// "With certificate auth there is no authorization header: the TLS client
    /// certificate identifies the app."
    @Test(arguments: Transport.allCases)
    func aPasswordProtectedP12DeliversWithoutAnAuthorizationHeader(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("sandbox.p12"), password: Self.certs.password)
        let (results, mock) = try await Self.send(cert, sandbox: true, transport: transport, count: 200)

        #expect(results.count == 200)
        #expect(results.allSatisfy { $0.status == 200 && $0.reason == nil })
        let recorded = mock.recordedRequests()
        #expect(recorded.count >= 200)
        #expect(recorded.allSatisfy { $0.header("authorization") == nil })
        #expect(mock.statistics().distinctJWTs == 0)
    }

    /// "Its subject UID is the bundle id and it also covers <bundle>.voip and
    /// <bundle>.complication topics."
    @Test(arguments: Transport.allCases)
    func aPEMCoversItsBundleAndItsVoipTopic(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("production.pem"))
        #expect(cert.bundleID == TestPKI.shared.topic)
        #expect(cert.isForProduction && !cert.isForSandbox)
        #expect(cert.topics == [TestPKI.shared.topic, TestPKI.shared.topic + ".voip", TestPKI.shared.topic + ".complication"])

        let (plain, _) = try await Self.send(cert, sandbox: false, transport: transport)
        #expect(plain.map(\.status) == [200])
        let (voip, _) = try await Self.send(cert, sandbox: false, transport: transport,
                                            topic: TestPKI.shared.topic + ".voip", pushType: .voip)
        #expect(voip.map(\.status) == [200])
    }

    /// "Apple's universal certificates list topics in an extension,
    /// 1.2.840.113635.100.6.3.6"; they carry both environment markers.
    @Test(arguments: Transport.allCases)
    func aUniversalCertificateCoversTheTopicsItsExtensionLists(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("universal.pem"))
        #expect(cert.topics.contains(Self.certs.extraTopic))
        #expect(cert.isForSandbox && cert.isForProduction)
        let topics = [TestPKI.shared.topic, Self.certs.extraTopic]
        for sandbox in [true, false] {
            let (results, _) = try await Self.send(cert, sandbox: sandbox, transport: transport,
                                                   topic: Self.certs.extraTopic, mockTopics: topics)
            #expect(results.map(\.status) == [200], "sandbox: \(sandbox)")
        }
    }

    /// Old Keychain exports use RC2/3DES, which OpenSSL 3 keeps in its legacy provider.
    @Test func aLegacyP12WithoutAPasswordLoads() throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("legacy.p12"))
        #expect(cert.bundleID == TestPKI.shared.topic)
    }

    // MARK: - Refused by the server

    /// "A certificate for the sandbox used on production gives 403 BadCertificateEnvironment."
    @Test(arguments: Transport.allCases)
    func aSandboxCertificateOnProductionIsBadCertificateEnvironment(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("sandbox.pem"))
        let (results, _) = try await Self.send(cert, sandbox: false, transport: transport, count: 3)
        #expect(results.count == 3)
        #expect(results.allSatisfy { $0.status == 403 && $0.reason == .badCertificateEnvironment && $0.attempts == 1 })
    }

    /// "An unusable certificate 403 BadCertificate": one the server's CA did not issue.
    @Test(arguments: Transport.allCases)
    func aCertificateFromAnotherCAIsBadCertificate(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("wrongca.pem"))
        let (results, _) = try await Self.send(cert, sandbox: true, transport: transport, count: 3)
        #expect(results.count == 3)
        #expect(results.allSatisfy { $0.status == 403 && $0.reason == .badCertificate })
    }

    /// "A topic it does not cover 400 TopicDisallowed."
    @Test(arguments: Transport.allCases)
    func aTopicTheCertificateDoesNotCoverIsTopicDisallowed(transport: Transport) async throws {
        let cert = try ClientCertificate(contentsOf: Self.certs.path("other.pem"))
        let (results, _) = try await Self.send(cert, sandbox: true, transport: transport, count: 2,
                                               mockTopics: [TestPKI.shared.topic, Self.certs.otherTopic])
        #expect(results.count == 2)
        #expect(results.allSatisfy { $0.status == 400 && $0.reason == .topicDisallowed })
    }

    // MARK: - Refused at load: a typed error, one line, never the password

    @Test func aWrongPasswordIsBadPassword() throws {
        let wrong = "wrong horse"
        for name in ["sandbox.p12", "encrypted.pem"] {
            let error = try #require(throws: ClientCertificate.LoadError.self) {
                try ClientCertificate(contentsOf: Self.certs.path(name), password: wrong)
            }
            #expect(error.kind == .badPassword)
            #expect(error.description.contains(name))
            #expect(!error.description.contains(wrong) && !error.description.contains("\n"))
        }
        let none = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: Self.certs.path("sandbox.p12"))
        }
        #expect(none.kind == .badPassword)
        #expect(none.description.contains("password-protected"))
    }

    @Test func anExpiredCertificateIsRefused() throws {
        let error = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: Self.certs.path("expired.p12"), password: Self.certs.password)
        }
        #expect(error.kind == .expired)
        #expect(error.description.contains("expired on"))
        #expect(!error.description.contains(Self.certs.password))
    }

    @Test func aKeyThatIsNotTheCertificatesIsRefused() throws {
        let error = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: Self.certs.path("mismatch.pem"))
        }
        #expect(error.kind == .keyMismatch)
        #expect(error.description.contains("does not match"))
    }

    @Test func anUnreadableOrMalformedFileIsRefused() throws {
        let missing = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: "/nonexistent/cert.p12")
        }
        #expect(missing.kind == .unreadable)
        // A provider key is not a certificate.
        let p8 = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: TestPKI.shared.keyPath)
        }
        #expect(p8.kind == .malformed)
        // Nor is a payload.
        let json = try #require(throws: ClientCertificate.LoadError.self) {
            try ClientCertificate(contentsOf: Package.fixture("examples/payloads/quote_approved.json"))
        }
        #expect(json.kind == .malformed)
    }
}
