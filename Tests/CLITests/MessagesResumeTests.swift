import APNsMock
import Foundation
import Testing
import TestSupport

/// `--messages` with `--resume`: runs stopped by SIGINT, SIGTERM or SIGKILL at random
/// points, then resumed, add up to exactly one final record per line (issue #9).
@Suite struct MessagesResumeTests {
    @Test func runsKilledAtRandomPointsAddUpToOneFinalRecordPerLine() async throws {
        let input = MessagesInput(lines: 20_000)
        let mock = try CLI.mock {
            $0.latency = .milliseconds(2)
            $0.unregistered = input.unregistered
            $0.recordRequests = false
        }
        defer { mock.stop() }
        let scratch = Scratch()
        let file = scratch.file("m.jsonl", input.text)
        let output = scratch.path("o.jsonl")
        let base = CLI.arguments(mock) + ["--concurrency", "200"]

        let series = try await StopAndResume.run(
            mock, arguments: base, input: ["--messages", file], output: output,
            signals: [SIGINT, SIGKILL, SIGTERM, SIGKILL, SIGINT, SIGKILL], upTo: 4_000
        ) { run, status, stderr in
            #expect(status == 1)
            #expect(stderr.contains("message lines were not attempted") || stderr.contains("message line was not attempted"), "\(stderr)")
            StopAndResume.expectResumeHint(run: run, stderr: stderr, output: output)
        }
        let runs = series.runs
        #expect(runs.filter { !$0.hasSuffix(": 0") }.count >= 3, "the stops land mid-run: \(runs)")
        #expect(series.lastStatus == 0 || series.lastStatus == 1, "\(series.lastStderr)")
        #expect(!StopAndResume.wasInterrupted(series.lastStderr), "\(series.lastStderr)")

        let text = try String(contentsOfFile: output, encoding: .utf8)
        #expect(text.hasSuffix("\n"))
        let records = try Record.parse(text)
        var final: [Int: [Record]] = [:]
        for r in records where r.isFinalForLine { final[r.inputLine!, default: []].append(r) }
        #expect(Set(final.keys) == Set(input.expected.keys), "every message line has a final record, no other line (runs: \(runs))")
        let twice = final.filter { $0.value.count > 1 }
        #expect(twice.isEmpty, "\(twice.count) lines have more than one final record, e.g. line \(twice.first?.key ?? 0) (runs: \(runs))")
        for (line, rs) in final {
            guard let r = rs.first, let e = input.expected[line] else { continue }
            #expect(r.token == e.token, "line \(line)")
            #expect(r.reason == e.reason || (e.reason == nil && r.status == 200), "line \(line): \(r.line)")
            #expect(r.id == "evt-\(line)", "line \(line): \(r.line)")
        }
        #expect(records.allSatisfy { $0.inputLine != nil })
    }
}

/// 20k lines: tokens repeated on purpose (lines, not tokens, are the unit), blank
/// lines, a few lines that cannot be sent, and some tokens the mock calls unregistered.
struct MessagesInput {
    let text: String
    /// Line number → the token its final record names and the reason it ends with (nil: 200).
    let expected: [Int: (token: String, reason: String?)]
    let unregistered: [String: Int64]

    init(lines count: Int) {
        let tokens = CLI.tokens(count * 3 / 4, seed: 41)
        var unregistered: [String: Int64] = [:]
        for i in stride(from: 5, to: tokens.count, by: 997) { unregistered[tokens[i]] = 1_700_000_000_000 }
        var lines: [String] = [], expected: [Int: (String, String?)] = [:]
        var i = 0
        while expected.count < count {
            if i % 250 == 7 { lines.append("") }   // blank: no record
            let n = lines.count + 1
            let token = tokens[(i * 7) % tokens.count]   // wraps: every token on more than one line
            switch i % 1000 {
            case 13:
                lines.append(#"{"token":"\#(token)","payload":{"aps":{}},"id":"evt-\#(n)","priority":7}"#)
                expected[n] = (token, "InvalidMessage")
            case 14:
                lines.append(#"{"token":"xyz","payload":{"aps":{}},"id":"evt-\#(n)"}"#)
                expected[n] = ("xyz", "BadDeviceToken")
            default:
                lines.append(#"{"token":"\#(token)","payload":{"aps":{"alert":"line \#(n)"}},"id":"evt-\#(n)"}"#)
                expected[n] = (token, unregistered[token] == nil ? nil : "Unregistered")
            }
            i += 1
        }
        text = lines.joined(separator: "\n") + "\n"
        self.expected = expected
        self.unregistered = unregistered
    }
}

extension Record {
    /// A record `--resume` skips the line of, with --messages: the token mode's, and
    /// every line refused before sending.
    var isFinalForLine: Bool {
        isFinal || (status == 0 && (reason == "InvalidMessage" || reason == "PayloadTooLarge"))
    }
}
