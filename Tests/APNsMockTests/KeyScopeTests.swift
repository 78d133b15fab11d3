import APNsMock
import Foundation
import Testing
import TestSupport

/// APNs keys since February 2025: a key may serve one environment only, or only
/// some bundle ids, and a connection belongs to the key of its first push.
@Suite struct KeyScopeTests {
    let pki = Fixture.pki
    static let otherTopic = "com.example.other"

    /// A request signed with the second test key (same team as the first).
    func withOtherKey(_ r: Request = Request()) -> Request {
        r.with("authorization", "bearer \(Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.otherKeyID))")
    }

    @Test("A key restricted to sandbox, used in production, is 403 BadEnvironmentKeyIdInToken")
    func sandboxKeyInProduction() throws {
        let mock = try Fixture.mock { $0.keyEnvironments[Fixture.pki.keyID] = .sandbox }
        defer { mock.stop() }
        let a = curl(mock.port)
        #expect(a.status == 403)
        #expect(a.reason == "BadEnvironmentKeyIdInToken")
        #expect(mock.statistics().byReason["BadEnvironmentKeyIdInToken"] == 1)
    }

    @Test("A key restricted to production, used in sandbox, is 403 BadEnvironmentKeyIdInToken")
    func productionKeyInSandbox() throws {
        let mock = try Fixture.mock {
            $0.sandbox = true
            $0.keyEnvironments[Fixture.pki.keyID] = .production
        }
        defer { mock.stop() }
        #expect(curl(mock.port).reason == "BadEnvironmentKeyIdInToken")
    }

    @Test("A restricted key in its own environment, and an unrestricted key in either, are accepted")
    func keysInTheirEnvironment() throws {
        for sandbox in [false, true] {
            let mock = try Fixture.mock {
                $0.sandbox = sandbox
                $0.authKeys[Fixture.pki.otherKeyID] = Fixture.pki.otherKeyPath
                $0.keyEnvironments[Fixture.pki.keyID] = sandbox ? .sandbox : .production
            }
            defer { mock.stop() }
            #expect(curl(mock.port).status == 200)
            #expect(curl(mock.port, withOtherKey()).status == 200)
        }
    }

    @Test("A topic-specific key pushing to another bundle id is 400 TopicMismatch; its own, any push type, pass")
    func topicSpecificKey() throws {
        let mock = try Fixture.mock {
            $0.topics = [Fixture.pki.topic, Self.otherTopic]
            $0.keyTopics[Fixture.pki.keyID] = [Fixture.pki.topic]
        }
        defer { mock.stop() }
        let other = Request().with("apns-topic", Self.otherTopic)
        let voip = Request().with("apns-topic", "\(pki.topic).voip").with("apns-push-type", "voip")
        let (answers, _) = curl(mock.port, [Request(), other, voip])
        #expect(answers.map(\.status) == [200, 400, 200])
        #expect(answers[1].reason == "TopicMismatch")
        // A topic the mock does not know at all is still TopicDisallowed.
        #expect(curl(mock.port, Request().with("apns-topic", "com.example.unknown")).reason == "TopicDisallowed")
    }

    @Test("A team key (no topics listed) pushes to every topic of the mock")
    func teamKeyPushesAnywhere() throws {
        let mock = try Fixture.mock {
            $0.topics = [Fixture.pki.topic, Self.otherTopic]
            $0.authKeys[Fixture.pki.otherKeyID] = Fixture.pki.otherKeyPath
            $0.keyTopics[Fixture.pki.otherKeyID] = [Self.otherTopic]
        }
        defer { mock.stop() }
        let (answers, _) = curl(mock.port, [Request(), Request().with("apns-topic", Self.otherTopic)])
        #expect(answers.map(\.status) == [200, 200])
    }

    @Test("A connection belongs to its first key: another key of the same team on it is 403 UnrelatedKeyIdInToken")
    func connectionBoundToItsFirstKey() throws {
        let mock = try Fixture.mock {
            $0.authKeys[Fixture.pki.otherKeyID] = Fixture.pki.otherKeyPath
            $0.tokenUpdateInterval = .zero   // a token change alone is allowed: only the key differs
        }
        defer { mock.stop() }
        let (answers, _) = curl(mock.port, [Request(), withOtherKey(), Request()])
        #expect(answers.map(\.status) == [200, 403, 200])
        #expect(answers[1].reason == "UnrelatedKeyIdInToken")
        #expect(mock.statistics().connectionsAccepted == 1)
        // The same key on a connection of its own is fine.
        #expect(curl(mock.port, withOtherKey()).status == 200)
        // A new token of the first key on the first key's connection is fine too.
        let (again, _) = curl(mock.port, [Request(), Request().with("authorization",
                                                                     "bearer \(Fixture.jwt(iat: Int(Date().timeIntervalSince1970) - 30))")])
        #expect(again.map(\.status) == [200, 200])
    }

    @Test("Environments and topics name configured keys only")
    func scopesNameConfiguredKeys() {
        #expect(throws: MockError.self) {
            _ = try Fixture.mock { $0.keyEnvironments["NOSUCHKEY1"] = .sandbox }
        }
        #expect(throws: MockError.self) {
            _ = try Fixture.mock { $0.keyTopics["NOSUCHKEY1"] = [Fixture.pki.topic] }
        }
    }

    @Test("apns-mock --key-environment and --key-topics")
    func commandLine() async throws {
        let binary = Package.executable("apns-mock")
        let base = ["--port", "0", "--cert", pki.serverCertificate, "--key", pki.serverKey,
                    "--auth-key", pki.keyPath, "--auth-key", pki.otherKeyPath, "--team-id", pki.teamID,
                    "--topic", pki.topic, "--topic", Self.otherTopic]
        for bad in [["--key-environment", "\(pki.keyID)=moon"], ["--key-environment", "sandbox"],
                    ["--key-topics", "\(pki.keyID)=a,,b"], ["--key-topics", "=\(pki.topic)"]] {
            let r = runSync(binary, base + bad)
            #expect(r.status != 0, "\(bad) accepted")
            #expect(r.stderr.contains(bad[0]), "\(bad): \(r.stderr)")
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = base + ["--key-environment", "\(pki.keyID)=sandbox",
                                    "--key-topics", "\(pki.otherKeyID)=\(pki.topic)"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        let port = try #require(UInt16(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        let other = withOtherKey()
        let answers = await offPool { [other] in
            [curl(port), curl(port, other), curl(port, other.with("apns-topic", Self.otherTopic))]
        }
        #expect(answers.map(\.status) == [403, 200, 400])
        #expect(answers.map(\.reason) == ["BadEnvironmentKeyIdInToken", nil, "TopicMismatch"])
        process.terminate()
        await offPool { process.waitUntilExit() }
    }
}
