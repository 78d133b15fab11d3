import APNsMock
import Foundation
import Testing
import TestSupport

/// `--resume`: runs stopped by SIGINT, SIGTERM or SIGKILL at random points, then
/// resumed, add up to exactly one final record per token (issue #5, item 2).
@Suite struct ResumeTests {
    /// The issue's test: 100,000 tokens under `make soak`, killed at random points by
    /// every signal, resumed until a run finishes (eighteen stops). `make test` runs
    /// 20,000 tokens and six stops, each within the same share of the run.
    @Test func runsKilledAtRandomPointsAddUpToOneFinalRecordPerToken() async throws {
        let soak = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1"
        let distinct = soak ? 100_000 : 20_000
        let input = ResumeInput(distinct: distinct)
        let mock = try CLI.mock {
            $0.latency = .milliseconds(2)
            $0.unregistered = input.unregistered
            $0.recordRequests = false
        }
        defer { mock.stop() }
        let scratch = Scratch()
        let tokensFile = scratch.file("t.txt", input.text)
        let output = scratch.path("o.jsonl")
        let base = CLI.arguments(mock)

        // Each run is stopped after a random number of answers, from right at the
        // first (before any record is flushed) to well into the run.
        let signals = [SIGINT, SIGKILL, SIGTERM, SIGKILL, SIGINT, SIGKILL]
        let series = try await StopAndResume.run(
            mock, arguments: base, input: [CLI.payload, tokensFile], output: output,
            signals: soak ? signals + signals + signals : signals, upTo: UInt64(distinct * 3 / 20)
        ) { run, status, stderr in
            if status == 1 { StopAndResume.expectResumeHint(run: run, stderr: stderr, output: output) }
        }
        let runs = series.runs
        // 1 when this run itself wrote a 410 or the malformed line's record.
        #expect(series.lastStatus == 0 || series.lastStatus == 1, "\(series.lastStderr)")
        #expect(!StopAndResume.wasInterrupted(series.lastStderr), "\(series.lastStderr)")

        let text = try String(contentsOfFile: output, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        let records = try Record.parse(text)
        var final: [String: Int] = [:]
        for r in records where r.isFinal { final[r.token.lowercased(), default: 0] += 1 }
        #expect(final.count == input.distinctLines.count, "every distinct token line has a final record (runs: \(runs))")
        #expect(Set(final.keys) == input.distinctLines)
        let twice = final.filter { $0.value > 1 }
        #expect(twice.isEmpty, "\(twice.count) tokens have more than one final record, e.g. \(twice.first?.key ?? "") (runs: \(runs))")
        for r in records where input.unregistered[r.token] != nil {
            #expect(r.status == 410)
        }
        #expect(mock.statistics().byStatus[200, default: 0] >= UInt64(input.distinct - input.unregistered.count))
    }

    /// A resumed run sends only what is not settled, appends, and keeps one header.
    @Test(arguments: ["jsonl", "csv"])
    func resumeSendsOnlyWhatIsNotSettled(format: String) async throws {
        let tokens = CLI.tokens(300, seed: 11)
        let refused = tokens[5]
        let mock = try CLI.mock {
            $0.unregistered = [tokens[1]: 1_700_000_000_000]
            $0.forced = [refused: .serviceUnavailable]
        }
        defer { mock.stop() }
        let scratch = Scratch()
        let file = scratch.file("t.txt", (tokens + ["bad-line"]).joined(separator: "\n"))
        let output = scratch.path("o.\(format)")
        let args = CLI.arguments(mock) + ["--retries", "0", "--format", format]
        let first = await CLI.run(args + ["--output", output, CLI.payload, file])
        #expect(first.status == 1)
        #expect(mock.statistics().requests == 300)

        let second = await CLI.run(args + ["--resume", output, CLI.payload, file])
        #expect(second.status == 1, "the 503 token is still not delivered")
        #expect(mock.statistics().requests == 301, "only the 503 token was sent again")
        #expect(mock.attempts(for: refused) == 2)
        #expect(second.stderr.contains("1 token: 0 delivered; 1 × 503 ServiceUnavailable"), "\(second.stderr)")
        #expect(second.stderr.contains("300 tokens already settled in \(output) skipped"), "\(second.stderr)")

        let text = try String(contentsOfFile: output, encoding: .utf8)
        let lines = text.split(separator: format == "csv" ? "\r\n" : "\n")
        #expect(lines.count == 301 + 1 + (format == "csv" ? 1 : 0), "301 + the appended one (+ one header)")
        #expect(lines.filter { $0.hasPrefix("token,status") }.count == (format == "csv" ? 1 : 0))
    }

    /// A record cut short by a kill is dropped (with a line saying so) and its token sent again.
    @Test func aTornLastRecordIsDroppedAndItsTokenSentAgain() async throws {
        let tokens = CLI.tokens(20, seed: 12)
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let file = scratch.file("t.txt", tokens.joined(separator: "\n"))
        let output = scratch.path("o.jsonl")
        #expect(await CLI.run(CLI.arguments(mock) + ["--output", output, CLI.payload, file]).status == 0)
        var text = try String(contentsOfFile: output, encoding: .utf8)
        let lines = text.split(separator: "\n")
        let torn = try Record(String(lines[19]))
        text = lines[..<19].joined(separator: "\n") + "\n" + lines[19].prefix(30)
        try Data(text.utf8).write(to: URL(fileURLWithPath: output))

        let r = await CLI.run(CLI.arguments(mock) + ["--resume", output, CLI.payload, file])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("cut short"))
        #expect(mock.attempts(for: torn.token) == 2)
        let records = try Record.parse(try String(contentsOfFile: output, encoding: .utf8))
        #expect(records.count == 20)
        #expect(Set(records.map(\.token)) == Set(tokens))
    }

    @Test func aMissingResumeFileIsStartedAndAFinishedOneSendsNothing() async throws {
        let tokens = CLI.tokens(10, seed: 13)
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let file = scratch.file("t.txt", tokens.joined(separator: "\n"))
        let args = CLI.arguments(mock) + ["--resume", scratch.path("new.jsonl"), CLI.payload, file]
        #expect(await CLI.run(args).status == 0)
        let again = await CLI.run(args)
        #expect(again.status == 0, "nothing left to send is success: \(again.stderr)")
        #expect(again.stderr.contains("nothing left to send"))
        #expect(mock.statistics().requests == 10)
    }

    /// Each problem with the resume file: one line, exit 2, nothing sent, the file untouched.
    @Test func resumeFileProblemsStopBeforeSending() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let file = scratch.file("t.txt", CLI.tokens(3).joined(separator: "\n"))
        let good = #"{"token":"aa","status":200,"apns_id":null,"reason":null,"timestamp":null,"attempts":1}"#
        let cases: [(name: String, content: String?, extra: [String], says: String)] = [
            ("garbage.jsonl", good + "\nnot a record\n" + good + "\n", [], "garbage.jsonl:2: not an apns-send jsonl record"),
            ("records.csv", "token,status,apns_id,reason,timestamp,attempts\r\naa,200,,,,1\r\n", ["--format", "jsonl"],
             "holds csv records; --format jsonl cannot append to it"),
            ("o.jsonl", good + "\n", ["--output", scratch.path("other.jsonl")], "cannot be another one"),
            ("t.txt", nil, [], "is an input file"),
        ]
        for c in cases {
            let path = c.content.map { scratch.file(c.name, $0) } ?? scratch.path(c.name)
            let before = try Data(contentsOf: URL(fileURLWithPath: path))
            let r = await CLI.run(CLI.arguments(mock) + ["--resume", path] + c.extra + [CLI.payload, file])
            #expect(r.status == 2, "\(c.name): \(r.stderr)")
            #expect(CLI.lines(r.stderr).count == 1 && r.stderr.contains(c.says), "\(c.name): \(r.stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "\(c.name) untouched")
        }
        #expect(mock.statistics().connectionsAccepted == 0)
    }
}

/// 100k distinct tokens with repeats, a malformed line and some tokens the mock calls unregistered.
struct ResumeInput {
    let distinct: Int
    let text: String
    let distinctLines: Set<String>
    let unregistered: [String: Int64]

    init(distinct: Int) {
        self.distinct = distinct
        let tokens = CLI.tokens(distinct, seed: 21)
        var lines = tokens
        for i in stride(from: 0, to: distinct, by: 97) { lines.append(tokens[i].uppercased()) }
        lines.append("not-a-token")
        text = lines.joined(separator: "\n") + "\n"
        distinctLines = Set(tokens + ["not-a-token"])
        var unregistered: [String: Int64] = [:]
        for i in stride(from: 3, to: distinct, by: 1009) { unregistered[tokens[i]] = 1_700_000_000_000 }
        self.unregistered = unregistered
    }
}

extension Record {
    /// A record `--resume` skips the token of (docs/cli.md, "What a run promises").
    var isFinal: Bool {
        switch (status, reason) {
        case (200, _), (410, _), (400, "BadDeviceToken"?), (400, "DeviceTokenNotForTopic"?), (0, "BadDeviceToken"?): true
        default: false
        }
    }
}
