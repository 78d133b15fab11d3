import APNsMock
import Foundation
import Testing
import TestSupport

/// `apns-send --messages` against the real mock over TLS (issue #9, and #13's header
/// checks): every bad line gets exactly its record and the rest go; each message
/// arrives with its own payload and headers; each environment's messages reach
/// only that environment's endpoint; kills and resumes add up to one final record
/// per line.
@Suite struct MessagesTests {
    /// One message line; nil values are left out.
    static func line(_ token: String, payload: String = #"{"aps":{"alert":"hi"}}"#, id: String? = nil,
                     extra: String = "") -> String {
        #"{"token":"\#(token)","payload":\#(payload)\#(id.map { #","id":"\#($0)""# } ?? "")\#(extra)}"#
    }

    static func messagesArguments(_ mock: MockServer) -> [String] {
        CLI.arguments(mock)
    }

    /// Records by their input line.
    static func byLine(_ records: [Record]) -> [Int: [Record]] {
        Dictionary(grouping: records) { $0.inputLine ?? -1 }
    }

    struct Bad {
        let text: String
        let reason: String
        let says: String
        var id: String? = nil
    }

    @Test func everyBadLineGetsItsRecordAndTheRestAreSent() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let tokens = CLI.tokens(12, seed: 31)
        let t = tokens[11]
        let big = #"{"aps":{"alert":""# + String(repeating: "x", count: 4077) + #""}}"#
        let bad: [Bad] = [
            Bad(text: #"{"token":"\#(t)","payload":{"aps":{}}"#, reason: "InvalidMessage", says: "not valid JSON"),
            Bad(text: #"[1,2]"#, reason: "InvalidMessage", says: "not a JSON object"),
            Bad(text: #"{"payload":{"aps":{}},"id":"no-token"}"#, reason: "InvalidMessage", says: #"no "token""#, id: "no-token"),
            Bad(text: #"{"token":"\#(t)","id":"no-payload"}"#, reason: "InvalidMessage", says: #"no "payload""#, id: "no-payload"),
            Bad(text: #"{"token":"\#(t)","payload":"hi"}"#, reason: "InvalidMessage", says: #""payload" must be a JSON object"#),
            Bad(text: #"{"token":"not-hex","payload":{},"id":"bad-token"}"#, reason: "BadDeviceToken", says: "hex digits", id: "bad-token"),
            Bad(text: #"{"token":"\#(t)","payload":\#(big)}"#, reason: "PayloadTooLarge", says: "4097 bytes"),
            Bad(text: #"{"token":"\#(t)","payload":{},"collapse_id":"abc\r\nx-injected: yes"}"#, reason: "InvalidMessage",
                says: #""collapse_id" has a control character"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"topic":"\#(CLI.pki.topic)\nx-injected: yes"}"#, reason: "InvalidMessage",
                says: #""topic" has a control character"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"push_type":"banner"}"#, reason: "InvalidMessage", says: #""push_type" 'banner'"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"priority":7}"#, reason: "InvalidMessage", says: #""priority" 7 is not 10, 5 or 1"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"expiration":-5}"#, reason: "InvalidMessage", says: #""expiration" -5"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"environment":"staging"}"#, reason: "InvalidMessage", says: #""environment" 'staging'"#),
            Bad(text: #"{"token":"\#(t)","payload":{},"id":42}"#, reason: "InvalidMessage", says: #""id" must be a string"#),
        ]
        // Good and bad lines interleaved, with blank lines (skipped, but counted in numbering).
        var lines: [String] = [], expectedBad: [Int: Bad] = [:], expectedGood: [Int: (token: String, id: String)] = [:]
        for (i, b) in bad.enumerated() {
            lines.append(Self.line(tokens[i % 11], id: "good-\(i)"))
            expectedGood[lines.count] = (tokens[i % 11], "good-\(i)")
            lines.append(b.text)
            expectedBad[lines.count] = b
            if i % 4 == 0 { lines.append("") }
        }
        let scratch = Scratch()
        let file = scratch.file("m.jsonl", lines.joined(separator: "\n") + "\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--messages", file])
        #expect(r.status == 1, "bad lines mean not all delivered, not a usage error: \(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == expectedBad.count + expectedGood.count, "one record per non-blank line")
        let byLine = Self.byLine(records)
        for (n, b) in expectedBad {
            let rec = try #require(byLine[n]?.first, "no record for line \(n)")
            #expect(byLine[n]?.count == 1)
            #expect(rec.status == 0 && rec.reason == b.reason && rec.apnsID == nil && rec.attempts == 0, "line \(n): \(rec.line)")
            #expect(rec.error?.contains(b.says) == true, "line \(n): '\(b.says)' not in \(rec.line)")
            #expect(rec.id == b.id, "line \(n): \(rec.line)")
            #expect(rec.hasContractKeyOrder)
        }
        for (n, good) in expectedGood {
            let rec = try #require(byLine[n]?.first, "no record for line \(n)")
            #expect(byLine[n]?.count == 1)
            #expect(rec.status == 200 && rec.token == good.token && rec.id == good.id, "line \(n): \(rec.line)")
        }
        #expect(mock.statistics().requests == UInt64(expectedGood.count), "no bad line was sent")
        #expect(r.stderr.contains("\(records.count) messages: \(expectedGood.count) delivered"), "\(r.stderr)")
        #expect(r.stderr.contains("1 × 0 BadDeviceToken") && r.stderr.contains("1 × 0 PayloadTooLarge"), "\(r.stderr)")
    }

    /// Each message's payload bytes and headers reach the mock as the line gave
    /// them; repeats to one token are separate sends; the apns-id of a line is the
    /// same on every run.
    @Test func payloadsAndHeadersArriveAsGivenAndRepeatsAreSentTwice() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let tokens = CLI.tokens(4, seed: 32)
        let topic = CLI.pki.topic
        struct Sent { let line: String; let payload: String; let headers: [String: String?] }
        let cases: [Sent] = [
            Sent(line: Self.line(tokens[0], payload: #"{ "aps" : { "alert" : "one" }, "n" : 1.50 }"#, id: "e1"),
                 payload: #"{"aps":{"alert":"one"},"n":1.50}"#,
                 headers: ["apns-push-type": "alert", "apns-priority": nil, "apns-collapse-id": nil, "apns-expiration": nil,
                           "apns-topic": topic]),
            Sent(line: Self.line(tokens[1], payload: #"{"aps":{"content-available":1},"z":"\u00e9"}"#, id: "e2",
                                 extra: #","push_type":"background","priority":5,"collapse_id":"order-7","expiration":0"#),
                 payload: #"{"aps":{"content-available":1},"z":"\u00e9"}"#,
                 headers: ["apns-push-type": "background", "apns-priority": "5", "apns-collapse-id": "order-7",
                           "apns-expiration": "0", "apns-topic": topic]),
            Sent(line: Self.line(tokens[2], payload: #"{"aps":{"alert":"three"}}"#,
                                 extra: #","priority":1,"expiration":1900000000,"topic":"\#(topic)","x-mine":{"k":[1]}"#),
                 payload: #"{"aps":{"alert":"three"}}"#,
                 headers: ["apns-push-type": "alert", "apns-priority": "1", "apns-expiration": "1900000000", "apns-topic": topic]),
            // The same token again, with another payload: a second send.
            Sent(line: Self.line(tokens[0], payload: #"{"aps":{"alert":"four"}}"#, id: "e4", extra: #","priority":10"#),
                 payload: #"{"aps":{"alert":"four"}}"#,
                 headers: ["apns-push-type": "alert", "apns-priority": "10", "apns-topic": topic]),
            // And the very same line again.
            Sent(line: Self.line(tokens[0], payload: #"{"aps":{"alert":"four"}}"#, id: "e4", extra: #","priority":10"#),
                 payload: #"{"aps":{"alert":"four"}}"#,
                 headers: ["apns-push-type": "alert", "apns-priority": "10", "apns-topic": topic]),
        ]
        let scratch = Scratch()
        let file = scratch.file("m.jsonl", cases.map(\.line).joined(separator: "\r\n"))
        let r = await CLI.run(CLI.arguments(mock) + ["--messages", file])
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == cases.count)
        let requests = mock.recordedRequests()
        #expect(requests.count == cases.count, "repeats are not merged")
        #expect(mock.attempts(for: tokens[0]) == 3)
        for (i, c) in cases.enumerated() {
            let rec = try #require(records.first { $0.inputLine == i + 1 })
            #expect(rec.status == 200)
            let request = try #require(requests.first { $0.header("apns-id") == rec.apnsID }, "line \(i + 1) not seen by the mock")
            #expect(request.token == rec.token)
            #expect(String(decoding: request.body, as: UTF8.self) == c.payload, "line \(i + 1)")
            for (name, value) in c.headers {
                #expect(request.header(name) == value, "line \(i + 1): \(name) is \(request.header(name) ?? "absent")")
            }
        }
        #expect(Set(records.compactMap(\.apnsID)).count == cases.count, "every line its own apns-id, repeats included")

        let again = await CLI.run(CLI.arguments(mock) + ["--messages", file])
        let second = try Record.parse(again.stdout)
        for rec in records {
            #expect(second.first { $0.inputLine == rec.inputLine }?.apnsID == rec.apnsID, "a line's apns-id is stable across runs")
        }
    }

    /// Sandbox and production lines in one file, two mocks: each gets only its own.
    @Test(arguments: [false, true])
    func eachEnvironmentsMessagesGoToItsOwnEndpoint(viaEndpointFlag: Bool) async throws {
        let production = try CLI.mock()
        defer { production.stop() }
        let sandbox = try CLI.mock { $0.sandbox = true }
        defer { sandbox.stop() }
        let tokens = CLI.tokens(30, seed: 33)
        var lines: [String] = [], expectSandbox = Set<String>(), expectProduction = Set<String>()
        for (i, token) in tokens.enumerated() {
            switch i % 3 {
            case 0:
                lines.append(Self.line(token, extra: #","environment":"sandbox""#))
                expectSandbox.insert(token)
            case 1:
                lines.append(Self.line(token, extra: #","environment":"production""#))
                expectProduction.insert(token)
            default:   // --env's
                lines.append(Self.line(token))
                if viaEndpointFlag { expectSandbox.insert(token) } else { expectProduction.insert(token) }
            }
        }
        let scratch = Scratch()
        let file = scratch.file("m.jsonl", lines.joined(separator: "\n"))
        let common = ["--topic", CLI.pki.topic] + CLI.credentials() + ["--cacert", CLI.pki.caFile, "--messages", file]
        let endpoints = viaEndpointFlag
            ? ["--env", "sandbox", "--endpoint", "https://127.0.0.1:\(sandbox.port)",
               "--production-endpoint", "https://127.0.0.1:\(production.port)"]
            : ["--env", "production", "--sandbox-endpoint", "https://127.0.0.1:\(sandbox.port)",
               "--production-endpoint", "https://127.0.0.1:\(production.port)"]
        let r = await CLI.run(common + endpoints)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Record.parse(r.stdout).allSatisfy { $0.status == 200 })
        #expect(Set(sandbox.recordedRequests().compactMap(\.token)) == expectSandbox)
        #expect(Set(production.recordedRequests().compactMap(\.token)) == expectProduction)
        #expect(sandbox.statistics().requests == UInt64(expectSandbox.count))
        #expect(production.statistics().requests == UInt64(expectProduction.count))
    }

    /// Issue #13: a header flag with a control character is a usage error: exit 2,
    /// one line that does not echo the value, nothing sent.
    @Test func headerInjectionInAFlagIsAUsageError() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(2).joined(separator: "\n"))
        let messages = scratch.file("m.jsonl", Self.line(CLI.tokens(1)[0]))
        let inputs = [[CLI.payload, tokens], ["--messages", messages]]
        for input in inputs {
            for (flag, value) in [("--collapse-id", "abc\r\nx-injected: yes"), ("--topic", CLI.pki.topic + "\nx-injected: yes")] {
                let r = await CLI.run(CLI.credentials() + CLI.endpoint(mock) + ["--topic", CLI.pki.topic, flag, value] + input)
                let lines = CLI.lines(r.stderr)
                #expect(r.status == 2, "\(flag) \(input): \(r.stderr)")
                #expect(lines.count == 1, "\(flag): \(r.stderr)")
                #expect(lines.first?.contains("\(flag) has a control character") == true, "\(r.stderr)")
                #expect(!r.stderr.contains("x-injected"), "the value is not echoed")
                #expect(r.stdout.isEmpty)
            }
        }
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    @Test func usageErrorsOfTheMessagesMode() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let messages = scratch.file("m.jsonl", Self.line(CLI.tokens(1)[0]) + "\n")
        let tokens = scratch.file("t.txt", CLI.tokens(1)[0])
        let tokenRecords = scratch.file("t-records.jsonl",
            #"{"token":"aa","status":200,"apns_id":null,"reason":null,"timestamp":null,"attempts":1}"# + "\n")
        let base = CLI.arguments(mock)
        let cases: [([String], String)] = [
            (base + ["--messages", messages, CLI.payload, tokens], "--messages replaces PAYLOAD.json and TOKENS.txt"),
            (base + ["--messages", messages, CLI.payload], "--messages replaces"),
            (base, "give PAYLOAD.json TOKENS.txt, or --messages"),
            (base + ["--messages", scratch.file("blank.jsonl", "\n  \n\r\n")], "no message lines"),
            (base + ["--messages", scratch.path("missing.jsonl")], "No such file"),
            (base + ["--messages", messages, "--sandbox-endpoint", "http://127.0.0.1:1"], "--sandbox-endpoint"),
            (base + ["--messages", messages, "--production-endpoint", "https://127.0.0.1:9"], "name different endpoints"),
            (base + ["--messages", messages, "--resume", tokenRecords], "PAYLOAD TOKENS run"),
            (base + ["--messages", messages, "--resume", messages], "is an input file"),
            (base + ["--messages", messages, "--push-type", "background", "--priority", "10"], "priority 10 is not allowed"),
        ]
        for (arguments, says) in cases {
            let r = await CLI.run(arguments)
            #expect(r.status == 2, "\(says): \(r.stderr)")
            #expect(CLI.lines(r.stderr).count == 1 && r.stderr.contains(says), "\(says): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    /// --dry-run checks every line and writes the refused lines' records, sends nothing;
    /// exit 1 when some line cannot be sent.
    @Test func dryRunChecksEveryLineAndSendsNothing() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let good = CLI.tokens(3, seed: 34).map { Self.line($0) }
        let file = scratch.file("m.jsonl", (good + ["oops", Self.line("zz", id: "z")]).joined(separator: "\n"))
        let r = await CLI.run(CLI.arguments(mock) + ["--dry-run", "--messages", file])
        #expect(r.status == 1, "\(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.map(\.inputLine) == [4, 5])
        #expect(records.map(\.reason) == ["InvalidMessage", "BadDeviceToken"])
        #expect(r.stderr.contains("dry run: nothing sent") && r.stderr.contains("3 would be sent"), "\(r.stderr)")
        let clean = await CLI.run(CLI.arguments(mock) + ["--dry-run", "--messages", scratch.file("ok.jsonl", good.joined(separator: "\n"))])
        #expect(clean.status == 0, "\(clean.stderr)")
        #expect(clean.stdout.isEmpty)
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    @Test func csvRecordsHaveLineIDAndErrorColumns() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let token = CLI.tokens(1, seed: 35)[0]
        let file = scratch.file("m.jsonl", Self.line(token, id: "a,b") + "\n{\n")
        let out = scratch.path("o.csv")
        let r = await CLI.run(CLI.arguments(mock) + ["--format", "csv", "--output", out, "--messages", file])
        #expect(r.status == 1)
        let rows = try String(contentsOfFile: out, encoding: .utf8).components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(rows.first == "token,status,apns_id,reason,timestamp,attempts,line,id,error")
        #expect(rows.count == 3)
        #expect(rows.contains { $0.hasPrefix("\(token),200,") && $0.hasSuffix(",1,\"a,b\",") })
        #expect(rows.contains { $0.hasPrefix(",0,,InvalidMessage,,0,2,,not valid JSON") })
        // And a resume of it sends nothing more: both lines are settled.
        let again = await CLI.run(CLI.arguments(mock) + ["--resume", out, "--messages", file])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("2 lines already settled"), "\(again.stderr)")
        #expect(mock.statistics().requests == 1)
    }

    @Test func helpDocumentsTheMessagesMode() async {
        let r = await CLI.run(["--help"])
        #expect(r.status == 0)
        let help = r.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for text in ["--messages", "--sandbox-endpoint", "--production-endpoint", "InvalidMessage", "unknown keys are ignored",
                     "repeats are not merged", "\"line\"", "PayloadTooLarge"] {
            #expect(help.contains(text), "--help does not mention \(text)")
        }
    }
}
