import APNsMock
import Foundation
import Testing
import TestSupport

/// Secrets never reach an output: whatever apns-send writes (stdout, stderr, the
/// --output file), on success, dry run, 403, unreachable endpoint or a bad key,
/// holds neither the private key's text nor a whole provider token.
@Suite struct SecretsTests {
    /// Every output of one run, as one text to search.
    struct Outputs {
        let result: ProcessResult
        let file: String
        var all: String { result.stdout + "\n" + result.stderr + "\n" + file }
    }

    /// The .p8's base64 body, without the PEM armour and line breaks.
    static func keyBody(_ path: String) throws -> String {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            .filter { !$0.hasPrefix("-----") }.joined()
    }

    /// Any 24 consecutive characters of the key's body: catches a key printed
    /// whole, per PEM line, or re-wrapped at another width.
    static func expectNoKeyMaterial(_ text: String, keyPath: String = CLI.pki.keyPath,
                                    sourceLocation: SourceLocation = #_sourceLocation) throws {
        let body = Array(try keyBody(keyPath))
        let leaked = stride(from: 0, through: body.count - 24, by: 1).map { String(body[$0..<($0 + 24)]) }
            .first { text.contains($0) }
        #expect(leaked == nil, "private key text in the output", sourceLocation: sourceLocation)
    }

    /// The whole JWT, and its signature on its own, are absent.
    static func expectNoJWT(_ text: String, _ jwt: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!text.contains(jwt), "the whole provider token in the output", sourceLocation: sourceLocation)
        let signature = String(jwt.split(separator: ".").last ?? "")
        #expect(signature.count >= 80)
        #expect(!text.contains(signature), "the token's signature in the output", sourceLocation: sourceLocation)
        expectNoJWTShape(text, sourceLocation: sourceLocation)
    }

    static func expectNoJWTShape(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!text.contains(#/eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{20,}/#),
                "something shaped like a signed JWT in the output", sourceLocation: sourceLocation)
    }

    /// The provider token the mock saw ("bearer " stripped).
    static func recordedJWT(_ mock: MockServer) throws -> String {
        let auth = try #require(mock.recordedRequests().first?.header("authorization"))
        #expect(auth.hasPrefix("bearer "))
        return String(auth.dropFirst("bearer ".count))
    }

    static func run(_ arguments: [String], scratch: Scratch) async -> Outputs {
        let output = scratch.path("out-\(UUID().uuidString).jsonl")
        let r = await CLI.run(["--output", output] + arguments)
        return Outputs(result: r, file: (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    @Test func normalRunShowsNoKeyAndNoToken() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(3).joined(separator: "\n"))
        // Verbose progress and the summary go to stderr: search that too.
        let out = await Self.run(CLI.arguments(mock) + [CLI.payload, tokens], scratch: scratch)
        #expect(out.result.status == 0, "\(out.result.stderr)")
        #expect(try Record.parse(out.file).count == 3)
        try Self.expectNoKeyMaterial(out.all)
        Self.expectNoJWT(out.all, try Self.recordedJWT(mock))
    }

    @Test func dryRunShowsNoKeyAndNoToken() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", (CLI.tokens(2) + ["not-a-token"]).joined(separator: "\n"))
        let out = await Self.run(CLI.arguments(mock) + ["--dry-run", CLI.payload, tokens], scratch: scratch)
        #expect(out.result.status == 0, "\(out.result.stderr)")
        #expect(out.result.stderr.contains("dry run"))
        #expect(mock.statistics().streams == 0)
        try Self.expectNoKeyMaterial(out.all)
        // No request was made, so there is no recorded token to compare: look for
        // anything shaped like one (a JWT's parts start with "eyJ", base64 of '{"').
        Self.expectNoJWTShape(out.all)
    }

    /// A provider token the server refuses (403 InvalidProviderToken: unknown team):
    /// the refusal is reported, the token that was refused is not.
    @Test func refusedTokenIsNotEchoed() async throws {
        let mock = try CLI.mock { $0.teamIDs = ["OTHERTEAM9"] }
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(2).joined(separator: "\n"))
        let out = await Self.run(CLI.arguments(mock) + ["--retries", "0", CLI.payload, tokens], scratch: scratch)
        #expect(out.result.status == 1, "\(out.result.stderr)")
        let records = try Record.parse(out.file)
        #expect(records.count == 2)
        #expect(records.allSatisfy { $0.status == 403 && $0.reason == "InvalidProviderToken" })
        try Self.expectNoKeyMaterial(out.all)
        Self.expectNoJWT(out.all, try Self.recordedJWT(mock))
    }

    @Test func unreachableEndpointShowsNoKey() async throws {
        let closed = try CLI.mock()
        let port = closed.port
        closed.stop()
        let scratch = Scratch()
        let out = await Self.run(["--topic", CLI.pki.topic] + CLI.credentials()
                           + ["--endpoint", "https://127.0.0.1:\(port)", "--cacert", CLI.pki.caFile,
                              "--retries", "1", "--timeout", "2", CLI.payload,
                              scratch.file("t.txt", CLI.tokens(2).joined(separator: "\n"))],
                           scratch: scratch)
        #expect(out.result.status == 1)
        #expect(out.result.stderr.contains("unreachable"), "\(out.result.stderr)")
        try Self.expectNoKeyMaterial(out.all)
    }

    /// Keys that do not load: the message names the file and the reason, never its content.
    @Test(arguments: ["sec1-label", "truncated", "garbled"])
    func badKeyMessageShowsNoKeyText(kind: String) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let pem = try String(contentsOfFile: CLI.pki.keyPath, encoding: .utf8)
        let bad: String
        switch kind {
        case "sec1-label":
            bad = pem.replacingOccurrences(of: "PRIVATE KEY", with: "EC PRIVATE KEY")
        case "truncated":
            bad = String(pem.dropLast(40))
        default:
            let lines = pem.split(separator: "\n")
            bad = ([lines[0], "!!" + lines[1].dropFirst(2)] + lines.dropFirst(2)).joined(separator: "\n")
        }
        let keyPath = scratch.file("AuthKey_BAD.p8", bad)
        chmod(keyPath, 0o600)
        let out = await Self.run(["--topic", CLI.pki.topic, "--key", keyPath, "--key-id", CLI.pki.keyID,
                            "--team-id", CLI.pki.teamID] + CLI.endpoint(mock)
                           + [CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])], scratch: scratch)
        #expect(out.result.status == 2, "\(out.result.stderr)")
        #expect(CLI.lines(out.result.stderr).count == 1, "\(out.result.stderr)")
        #expect(out.result.stderr.contains("AuthKey_BAD.p8"))
        #expect(mock.statistics().streams == 0)
        try Self.expectNoKeyMaterial(out.all)
    }

    /// A key file group or others can read still works (the run succeeds), with
    /// one warning line on stderr naming the file.
    @Test func groupReadableKeyWorksWithAWarning() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let keyPath = scratch.path("AuthKey_\(CLI.pki.keyID).p8")
        try FileManager.default.copyItem(atPath: CLI.pki.keyPath, toPath: keyPath)
        chmod(keyPath, 0o644)
        let out = await Self.run(["--topic", CLI.pki.topic, "--key", keyPath, "--key-id", CLI.pki.keyID,
                            "--team-id", CLI.pki.teamID] + CLI.endpoint(mock)
                           + [CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])], scratch: scratch)
        #expect(out.result.status == 0, "\(out.result.stderr)")
        #expect(try Record.parse(out.file).first?.status == 200)
        let warning = CLI.lines(out.result.stderr).filter { $0.contains(keyPath) && $0.contains("readable") }
        #expect(warning.count == 1, "\(out.result.stderr)")
        try Self.expectNoKeyMaterial(out.all, keyPath: keyPath)

        // The same file at 0600: no warning.
        chmod(keyPath, 0o600)
        let quiet = await Self.run(["--topic", CLI.pki.topic, "--key", keyPath, "--key-id", CLI.pki.keyID,
                              "--team-id", CLI.pki.teamID] + CLI.endpoint(mock)
                             + [CLI.payload, scratch.file("t2.txt", CLI.tokens(1)[0])], scratch: scratch)
        #expect(quiet.result.status == 0)
        #expect(!quiet.result.stderr.contains("readable"), "\(quiet.result.stderr)")
    }

    /// The mock refuses to listen beyond loopback unless told to, with one line
    /// that says how.
    @Test(arguments: ["0.0.0.0", "::", "192.0.2.1"])
    func mockRefusesNonLoopback(host: String) {
        let pki = CLI.pki
        let r = runSync(Package.executable("apns-mock"),
                        ["--host", host, "--port", "0", "--cert", pki.serverCertificate, "--key", pki.serverKey],
                        timeout: 20)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(CLI.lines(r.stderr).count == 1, "\(r.stderr)")
        #expect(r.stderr.contains("not a loopback address"))
        #expect(r.stderr.contains("--allow-non-loopback") || r.stderr.contains("allow_non_loopback"))
        #expect(r.stdout.isEmpty, "nothing may announce a listening port")
    }
}
