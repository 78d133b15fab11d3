import APNsMock
import Foundation
import Testing
import TestSupport

/// Every usage, input or configuration error: exit status 2, exactly one line on
/// stderr naming the problem, no records, and not one request at the mock.
@Suite struct InputErrorTests {
    struct Case: CustomStringConvertible {
        let description: String
        let arguments: [String]
        /// Text the one stderr line must contain.
        let says: [String]
    }

    @Test func everyBadInputExitsTwoWithOneLineAndSendsNothing() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("tokens.txt", CLI.tokens(3).joined(separator: "\n") + "\n")
        let good = CLI.payload
        let base = ["--topic", CLI.pki.topic] + CLI.endpoint(mock)
        let creds = CLI.credentials()
        let big = scratch.file("big.json", #"{ "aps" : { "alert" : ""# + String(repeating: "x", count: 4077) + "\" } }\n")
        let voipBig = scratch.file("voip.json", #"{"aps":{"alert":""# + String(repeating: "v", count: 5101) + "\"}}")
        let p384 = scratch.path("p384.p8")
        let rsa = scratch.path("rsa.p8")
        #expect(runSync("/usr/bin/openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384]).status == 0)
        #expect(runSync("/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsa]).status == 0)
        let unreadableKey = scratch.file("unreadable.p8", "secret")
        chmod(unreadableKey, 0)
        let cases: [Case] = [
            Case(description: "missing payload", arguments: base + creds + [scratch.path("none.json"), tokens],
                 says: ["none.json", "No such file"]),
            Case(description: "payload is a directory", arguments: base + creds + [scratch.directory.path, tokens],
                 says: ["is a directory"]),
            Case(description: "payload not JSON", arguments: base + creds + [scratch.file("bad.json", #"{"aps": {"alert": "hi",}}"#), tokens],
                 says: ["bad.json", "not valid JSON", "at byte 23"]),
            Case(description: "payload not an object", arguments: base + creds + [scratch.file("array.json", "[1, 2]"), tokens],
                 says: ["array.json", "not a JSON object"]),
            Case(description: "empty payload", arguments: base + creds + [scratch.file("empty.json", ""), tokens],
                 says: ["empty.json", "empty"]),
            Case(description: "payload over 4096", arguments: base + creds + [big, tokens],
                 says: ["big.json", "4097 bytes", "4096"]),
            Case(description: "voip payload over 5120", arguments: base + creds + ["--push-type", "voip", voipBig, tokens],
                 says: ["5121 bytes", "5120"]),
            Case(description: "missing topic", arguments: CLI.endpoint(mock) + creds + [good, tokens],
                 says: ["topic"]),
            Case(description: "missing key", arguments: base + ["--key-id", CLI.pki.keyID, "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["no provider key", "--key"]),
            Case(description: "key file missing", arguments: base + ["--key", scratch.path("AuthKey_NONE.p8"), "--key-id", CLI.pki.keyID,
                                                                    "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["AuthKey_NONE.p8", "No such file"]),
            Case(description: "key file unreadable", arguments: base + ["--key", unreadableKey, "--key-id", CLI.pki.keyID,
                                                                       "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["unreadable.p8"]),
            Case(description: "key is P-384", arguments: base + ["--key", p384, "--key-id", CLI.pki.keyID, "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["P-256"]),
            Case(description: "key is RSA", arguments: base + ["--key", rsa, "--key-id", CLI.pki.keyID, "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["RSA", "P-256"]),
            Case(description: "key is a certificate", arguments: base + ["--key", CLI.pki.caFile, "--key-id", CLI.pki.keyID,
                                                                        "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["not a private key"]),
            Case(description: "key id not 10 characters", arguments: base + ["--key", CLI.pki.keyPath, "--key-id", "SHORTID",
                                                                              "--team-id", CLI.pki.teamID, good, tokens],
                 says: ["key id", "SHORTID", "10"]),
            Case(description: "team id not 10 characters", arguments: base + ["--key", CLI.pki.keyPath, "--key-id", CLI.pki.keyID,
                                                                               "--team-id", "TEAM_TOO_LONG", good, tokens],
                 says: ["team id", "TEAM_TOO_LONG", "10"]),
            Case(description: "unknown --env", arguments: base + creds + ["--env", "staging", good, tokens],
                 says: ["--env", "staging"]),
            Case(description: "unknown --push-type", arguments: base + creds + ["--push-type", "banner", good, tokens],
                 says: ["--push-type", "banner"]),
            Case(description: "unknown --priority", arguments: base + creds + ["--priority", "7", good, tokens],
                 says: ["--priority", "7"]),
            Case(description: "unknown --format", arguments: base + creds + ["--format", "xml", good, tokens],
                 says: ["--format", "xml"]),
            Case(description: "unknown --transport", arguments: base + creds + ["--transport", "spdy", good, tokens],
                 says: ["--transport", "spdy"]),
            Case(description: "tokens file with no token lines", arguments: base + creds + [good, scratch.file("none.txt", "# only a comment\n\n   \n")],
                 says: ["none.txt", "no token lines"]),
            Case(description: "tokens file empty", arguments: base + creds + [good, scratch.file("zero.txt", "")],
                 says: ["zero.txt", "no token lines"]),
            Case(description: "tokens file missing", arguments: base + creds + [good, scratch.path("missing.txt")],
                 says: ["missing.txt", "No such file"]),
            Case(description: "tokens file is a directory", arguments: base + creds + [good, scratch.directory.path],
                 says: ["is a directory"]),
            Case(description: "endpoint http", arguments: ["--topic", CLI.pki.topic] + creds + ["--endpoint", "http://127.0.0.1:\(mock.port)", good, tokens],
                 says: ["--endpoint", "https://HOST:PORT"]),
            Case(description: "endpoint without port", arguments: ["--topic", CLI.pki.topic] + creds + ["--endpoint", "https://127.0.0.1", good, tokens],
                 says: ["--endpoint"]),
            Case(description: "endpoint with a path", arguments: ["--topic", CLI.pki.topic] + creds + ["--endpoint", "https://127.0.0.1:\(mock.port)/3/device", good, tokens],
                 says: ["--endpoint"]),
            Case(description: "CA file missing", arguments: ["--topic", CLI.pki.topic] + creds + ["--endpoint", "https://127.0.0.1:\(mock.port)",
                                                                                                   "--cacert", scratch.path("ca-none.pem"), good, tokens],
                 says: ["ca-none.pem"]),
            Case(description: "unknown option", arguments: base + creds + ["--insecure", good, tokens],
                 says: ["--insecure"]),
            Case(description: "missing tokens argument", arguments: base + creds + [good],
                 says: ["TOKENS.txt"]),
            Case(description: "not a number", arguments: base + creds + ["--concurrency", "many", good, tokens],
                 says: ["--concurrency", "many"]),
            Case(description: "bad config key", arguments: base + creds + ["--config", scratch.file("bad.env", "APNS_KEYID=X\n"), good, tokens],
                 says: ["bad.env:1", "APNS_KEYID"]),
        ]
        for c in cases {
            let r = await CLI.run(c.arguments)
            let lines = CLI.lines(r.stderr)
            #expect(r.status == 2, "\(c): exit \(r.status), stderr \(r.stderr)")
            #expect(lines.count == 1, "\(c): stderr \(r.stderr)")
            #expect(lines.first?.hasPrefix("apns-send: ") == true, "\(c): stderr \(r.stderr)")
            for text in c.says {
                #expect(lines.first?.contains(text) == true, "\(c): '\(text)' not in \(r.stderr)")
            }
            #expect(r.stdout.isEmpty, "\(c): stdout \(r.stdout)")
        }
        let stats = mock.statistics()
        #expect(stats.streams == 0)
        #expect(stats.connectionsAccepted == 0)
    }

    @Test func helpDocumentsEveryFlagTheEnvironmentAndExitStatuses() async {
        let r = await CLI.run(["--help"])
        #expect(r.status == 0)
        for flag in ["--topic", "--key", "--key-id", "--team-id", "--config", "--env", "--endpoint", "--cacert",
                     "--push-type", "--priority", "--expiration", "--collapse-id", "--output", "--format",
                     "--concurrency", "--connections", "--transport", "--timeout", "--retries", "--dry-run",
                     "APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID", "APNS_TOPIC", "APNS_ENV",
                     "Precedence: flag > config file > environment", "Exit status"] {
            #expect(r.stdout.contains(flag), "--help does not mention \(flag)")
        }
    }
}
