import Foundation

/// Throw-away key material made once per test process by `scripts/gen-pki.sh`:
/// a local CA, the mock's TLS certificate for 127.0.0.1, and two provider keys.
public struct TestPKI: Sendable {
    public let directory: URL
    public var caFile: String { directory.appendingPathComponent("ca.pem").path }
    public var serverCertificate: String { directory.appendingPathComponent("server.crt").path }
    public var serverKey: String { directory.appendingPathComponent("server.key").path }
    public var keyPath: String { directory.appendingPathComponent("AuthKey_\(keyID).p8").path }
    /// A valid P-256 key the mock does not know unless told to.
    public var otherKeyPath: String { directory.appendingPathComponent("AuthKey_\(otherKeyID).p8").path }
    public let keyID: String
    public let otherKeyID: String
    public let teamID: String
    public let topic: String

    public static let shared: TestPKI = {
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-engine-tests-\(ProcessInfo.processInfo.processIdentifier)")
        let result = runSync("/bin/bash", [Package.root.appendingPathComponent("scripts/gen-pki.sh").path, dir.path])
        precondition(result.status == 0, "gen-pki.sh failed: \(result.stderr)")
        let ids = (try? String(contentsOf: dir.appendingPathComponent("ids.env"), encoding: .utf8)) ?? ""
        var values: [String: String] = [:]
        for line in ids.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return TestPKI(directory: dir, keyID: values["KEY_ID"]!, otherKeyID: values["OTHER_KEY_ID"]!,
                       teamID: values["TEAM_ID"]!, topic: values["TOPIC"]!)
    }()
}

public enum Package {
    /// The package root, found from this file's place in the tree.
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Where SwiftPM put the built executables (next to the test bundle).
    public static let productsDirectory: URL = {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = exe.deletingLastPathComponent()
        // Inside an .xctest bundle on some platforms: climb out of it.
        while dir.path.contains(".xctest") { dir.deleteLastPathComponent() }
        return dir
    }()

    public static func executable(_ name: String) -> String {
        productsDirectory.appendingPathComponent(name).path
    }

    public static func fixture(_ relative: String) -> String {
        root.appendingPathComponent(relative).path
    }
}

/// Client certificates for certificate auth, issued once per test process by
/// `scripts/gen-client-certs.sh` from `TestPKI`'s CA, shaped like Apple Push Services
/// certificates (subject UID = the bundle id, Apple's environment extensions). File
/// names: sandbox.p12 (password), sandbox.pem, encrypted.pem (password),
/// production.pem, legacy.p12, universal.pem (both environments, topic extension
/// with `extraTopic`), other.pem (UID `otherTopic`), expired.p12 / expired.pem,
/// mismatch.pem, unmarked.pem (no environment extension), wrongca.pem.
public struct ClientPKI: Sendable {
    public let directory: URL
    /// The certificates' bundle id: `TestPKI.topic`.
    public let topic: String
    /// A topic only universal.pem's topic extension lists.
    public let extraTopic: String
    /// other.pem's UID: an app the other certificates do not cover.
    public let otherTopic: String
    /// sandbox.p12's, encrypted.pem's and expired.p12's password (also in password.txt).
    public let password = "correct horse battery staple"

    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    public var passwordFile: String { path("password.txt") }
    public var wrongPasswordFile: String { path("wrong-password.txt") }

    public static let shared: ClientPKI = {
        let pki = TestPKI.shared
        let script = Package.root.appendingPathComponent("scripts/gen-client-certs.sh").path
        let result = runSync("/bin/bash", [script, pki.directory.path, pki.topic])
        precondition(result.status == 0, "gen-client-certs.sh failed: \(result.stderr)")
        let dir = pki.directory.appendingPathComponent("client")
        let ids = (try? String(contentsOf: dir.appendingPathComponent("ids.env"), encoding: .utf8)) ?? ""
        var values: [String: String] = [:]
        for line in ids.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return ClientPKI(directory: dir, topic: pki.topic, extraTopic: values["EXTRA_TOPIC"]!,
                         otherTopic: values["OTHER_TOPIC"]!)
    }()
}
