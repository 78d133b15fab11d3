import APNsMock
import Foundation
import Testing
import TestSupport

/// Real runs against the mock: one record per distinct token line with the mock's
/// answers, what the mock received, and the exit status.
@Suite struct SendTests {
    /// examples/tokens.txt with examples/unregistered.txt: the demo, checked record by record.
    @Test func demoTokensGetOneRecordPerDistinctLine() async throws {
        let unregistered = try Self.unregistered()
        let mock = try CLI.mock { $0.unregistered = unregistered }
        defer { mock.stop() }
        let tokensFile = CLI.examples.appendingPathComponent("tokens.txt").path
        let r = await CLI.run(CLI.arguments(mock) + [CLI.payload, tokensFile])
        #expect(r.status == 1, "a 410 and a malformed line mean not all delivered: \(r.stderr)")

        let lines = try String(contentsOfFile: tokensFile, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("#") }
        let distinct = Set(lines.map { $0.lowercased() })
        let records = try Record.parse(r.stdout)
        #expect(records.count == distinct.count)
        #expect(Set(records.map { $0.token.lowercased() }) == distinct)
        #expect(records.allSatisfy { $0.hasContractKeyOrder })

        let requests = mock.recordedRequests()
        for record in records {
            if let timestamp = unregistered[record.token] {
                #expect(record.status == 410)
                #expect(record.reason == "Unregistered")
                #expect(record.timestamp == timestamp)
            } else if record.status == 0 {
                #expect(record.reason == "BadDeviceToken")
                #expect(record.apnsID == nil)
                #expect(record.attempts == 0)
                #expect(record.timestamp == nil)
            } else {
                #expect(record.status == 200)
                #expect(record.reason == nil)
                #expect(record.timestamp == nil)
            }
            if record.status != 0 {
                #expect(record.attempts == 1)
                #expect(record.token == record.token.lowercased(), "sent lower-case")
                #expect(mock.attempts(for: record.token) == 1, "duplicates are sent once")
                let seen = requests.filter { $0.token == record.token }
                #expect(seen.count == 1)
                #expect(seen.first?.header("apns-id") == record.apnsID, "the record's apns_id is the one the mock saw")
            }
        }
        let malformed = records.filter { $0.status == 0 }
        #expect(malformed.count == 1)
        #expect(malformed.allSatisfy { mock.attempts(for: $0.token) == 0 }, "a malformed line is never sent")
        #expect(requests.count == distinct.count - malformed.count)
        #expect(requests.allSatisfy { $0.token == $0.token?.lowercased() })
        #expect(r.stderr.contains("1 × 410 Unregistered"))
        #expect(r.stderr.contains("1 duplicate line skipped"))
        #expect(r.stderr.contains("JWTs signed 1"))
    }

    /// Every token delivered: exit 0. CRLF line ends, padding, upper case and
    /// duplicates in different case all handled; the body is the compacted file.
    @Test func allDeliveredExitsZeroAndTheBodyIsTheCompactedFile() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(20)
        let text = "# header comment\r\n\r\n" + tokens.enumerated().map { i, t in
            i % 3 == 0 ? "  \(t.uppercased())\t" : t
        }.joined(separator: "\r\n") + "\r\n" + tokens[4].uppercased() + "\r\n" + tokens[5]   // no final newline
        let tokensFile = scratch.file("tokens.txt", text)
        // Just under the limit once compacted, well over it with its white space.
        let payloadText = "{\n  \"aps\" :" + String(repeating: " ", count: 1000) + "{\n    \"alert\" : \"" + String(repeating: "é a\\\" ", count: 500) + "\"\n  },\n  \"n\" : [ 1 , 2.50 , 3e2 ]\n}\n"
        let payloadFile = scratch.file("payload.json", payloadText)
        let expected = CLI.compacted(Array(payloadText.utf8))
        #expect(expected.count <= 4096 && payloadText.utf8.count > 4096)

        let r = await CLI.run(CLI.arguments(mock) + ["--output", scratch.path("out.jsonl"), payloadFile, tokensFile])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.isEmpty, "records went to --output")
        let records = try Record.parse(try String(contentsOfFile: scratch.path("out.jsonl"), encoding: .utf8))
        #expect(records.count == tokens.count)
        #expect(Set(records.map(\.token)) == Set(tokens))
        #expect(records.allSatisfy { $0.status == 200 && $0.attempts == 1 && $0.apnsID != nil })
        let requests = mock.recordedRequests()
        #expect(requests.count == tokens.count)
        #expect(requests.allSatisfy { $0.body == expected }, "the payload is sent byte for byte as the compacted file")
        #expect(requests.allSatisfy { $0.header("apns-topic") == CLI.pki.topic && $0.header("apns-push-type") == "alert" })
    }

    @Test func headersFromFlags() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(1)[0] + "\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--push-type", "background", "--priority", "5", "--expiration", "1900000000",
                                                "--collapse-id", "order-1234", "--transport", "nghttp2",
                                                scratch.file("bg.json", #"{"aps":{"content-available":1}}"#), tokens])
        #expect(r.status == 0, "\(r.stderr)")
        let request = try #require(mock.recordedRequests().first)
        #expect(request.header("apns-push-type") == "background")
        #expect(request.header("apns-priority") == "5")
        #expect(request.header("apns-expiration") == "1900000000")
        #expect(request.header("apns-collapse-id") == "order-1234")
        #expect(request.header("authorization")?.hasPrefix("bearer ") == true)
    }

    @Test func csvHasAHeaderAndQuotesPerRFC4180() async throws {
        let unregistered = [CLI.tokens(1, seed: 9)[0]: Int64(1_700_000_000_123)]
        let mock = try CLI.mock { $0.unregistered = unregistered }
        defer { mock.stop() }
        let scratch = Scratch()
        let good = CLI.tokens(2)
        let tokens = scratch.file("t.txt", ([#"bad,"token""#] + good + Array(unregistered.keys)).joined(separator: "\n"))
        let r = await CLI.run(CLI.arguments(mock) + ["--format", "csv", CLI.payload, tokens])
        #expect(r.status == 1)
        let rows = r.stdout.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.first == "token,status,apns_id,reason,timestamp,attempts")
        #expect(rows.count == 5)
        #expect(rows.contains(#""bad,""token""",0,,BadDeviceToken,,0"#))
        let gone = try #require(rows.first { $0.hasPrefix(unregistered.keys.first!) }).split(separator: ",", omittingEmptySubsequences: false)
        #expect(gone.count == 6)
        #expect(gone[1] == "410" && gone[3] == "Unregistered" && gone[4] == "1700000000123" && gone[5] == "1")
        for token in good {
            let row = try #require(rows.first { $0.hasPrefix(token) }).split(separator: ",", omittingEmptySubsequences: false)
            #expect(row[1] == "200" && row[2].count == 36 && row[3].isEmpty && row[4].isEmpty)
        }
    }

    @Test func dryRunSendsNothingAndStillReportsMalformedLines() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let tokensFile = CLI.examples.appendingPathComponent("tokens.txt").path
        let r = await CLI.run(CLI.arguments(mock) + ["--dry-run", CLI.payload, tokensFile])
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == 1)
        #expect(records.first?.token == "not-a-device-token-0123")
        #expect(records.first?.reason == "BadDeviceToken")
        #expect(r.stderr.contains("dry run"))
        #expect(r.stderr.contains("8 would be sent, 1 malformed"))
        #expect(r.stderr.contains("1 signature"), "a provider token was signed")
        #expect(!r.stderr.contains("eyJ"), "no JWT printed")
        #expect(mock.statistics().connectionsAccepted == 0)
        #expect(mock.statistics().streams == 0)
    }

    /// Many lines with many duplicates: streamed, deduplicated, one record each.
    @Test func thousandsOfTokensWithDuplicates() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(5000, seed: 3)
        var lines: [String] = []
        for (i, t) in tokens.enumerated() {
            lines.append(t)
            if i % 4 == 0 { lines.append(tokens[i / 2].uppercased()) }
        }
        let r = await CLI.run(CLI.arguments(mock) + ["--output", scratch.path("o.jsonl"), CLI.payload,
                                                scratch.file("t.txt", lines.joined(separator: "\n"))])
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Record.parse(try String(contentsOfFile: scratch.path("o.jsonl"), encoding: .utf8))
        #expect(records.count == tokens.count)
        #expect(Set(records.map(\.token)).count == tokens.count)
        #expect(mock.statistics().byStatus[200] == UInt64(tokens.count), "each distinct token answered once")
        #expect(r.stderr.contains("\(lines.count - tokens.count) duplicate lines skipped"))
    }

    /// libcurl, and the thirty-odd libraries it brings, would slow every start for
    /// nothing: a send on the default transport never loads it, and `--transport curl`
    /// opens it and sends the same. The dynamic loader says what it loads
    /// (LD_DEBUG=libs, on stderr).
    @Test func libcurlIsLoadedOnlyByTheCurlTransport() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("tokens.txt", CLI.tokens(3).joined(separator: "\n"))
        for transport in ["nghttp2", "curl"] {
            let r = await CLI.run(CLI.arguments(mock) + ["--transport", transport, CLI.payload, tokens],
                                  environment: ["LD_DEBUG": "libs"])
            #expect(r.status == 0, "\(transport): \(r.stderr.suffix(2000))")
            #expect(try Record.parse(r.stdout).map(\.status) == [200, 200, 200], "\(transport)")
            #expect(r.stderr.contains("calling init: "), "the loader's lines are there to read")
            #expect(r.stderr.contains("libcurl.so") == (transport == "curl"), "\(transport)")
        }
    }

    static func unregistered() throws -> [String: Int64] {
        let text = try String(contentsOfFile: CLI.examples.appendingPathComponent("unregistered.txt").path, encoding: .utf8)
        var out: [String: Int64] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: ",")
            out[String(parts[0])] = parts.count > 1 ? Int64(parts[1]) : 0
        }
        return out
    }
}
