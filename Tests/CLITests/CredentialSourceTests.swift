import APNsMock
import Foundation
import Testing
import TestSupport

/// Credentials, topic and environment from flags, a --config file and the
/// environment, with flag > config file > environment.
@Suite struct CredentialSourceTests {
    @Test func environmentVariablesAlone() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let r = await CLI.run(CLI.endpoint(mock) + [CLI.payload, scratch.file("t.txt", CLI.tokens(2).joined(separator: "\n"))],
                        environment: ["APNS_KEY_PATH": CLI.pki.keyPath, "APNS_KEY_ID": CLI.pki.keyID,
                                      "APNS_TEAM_ID": CLI.pki.teamID, "APNS_TOPIC": CLI.pki.topic])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Record.parse(r.stdout).allSatisfy { $0.status == 200 })
    }

    @Test func flagsWinOverTheEnvironment() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        // The environment names the other key, unknown to the mock: were it used, APNs would say 403.
        let r = await CLI.run(CLI.arguments(mock) + [CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])],
                        environment: ["APNS_KEY_PATH": CLI.pki.otherKeyPath, "APNS_KEY_ID": CLI.pki.otherKeyID,
                                      "APNS_TEAM_ID": "NOTATEAM", "APNS_TOPIC": "com.example.other"])
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// A config file with comments, quotes, `export` and a key path relative to its
    /// folder; it wins over the environment, which has an invalid team id.
    @Test func configFileWinsOverTheEnvironment() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        try FileManager.default.createDirectory(atPath: scratch.path("keys"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: CLI.pki.keyPath, toPath: scratch.path("keys/AuthKey.p8"))
        let config = scratch.file("keys/apns.env", """
            # test credentials
            APNS_KEY_PATH=AuthKey.p8
            APNS_KEY_ID="\(CLI.pki.keyID)"
              export APNS_TEAM_ID='\(CLI.pki.teamID)'

            APNS_TOPIC = \(CLI.pki.topic)
            APNS_ENV=sandbox
            """)
        let r = await CLI.run(CLI.endpoint(mock) + ["--config", config, CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])],
                        environment: ["APNS_TEAM_ID": "BAD", "APNS_KEY_PATH": "/nonexistent.p8"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(mock.recordedRequests().first?.header("apns-topic") == CLI.pki.topic)
    }

    @Test func flagsWinOverTheConfigFile() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let config = scratch.file("apns.env", "APNS_KEY_PATH=\(CLI.pki.otherKeyPath)\nAPNS_KEY_ID=\(CLI.pki.otherKeyID)\nAPNS_TOPIC=com.example.other\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--config", config, CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])])
        #expect(r.status == 0, "\(r.stderr)")
    }

    /// The environment's APNS_ENV is checked like --env.
    @Test func badEnvironmentFromTheEnvironment() async throws {
        let scratch = Scratch()
        let r = await CLI.run(["--topic", CLI.pki.topic] + CLI.credentials() + [CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])],
                        environment: ["APNS_ENV": "develop"])
        #expect(r.status == 2)
        #expect(CLI.lines(r.stderr) == ["apns-send: unknown --env 'develop' (expected sandbox, production)"])
    }
}
