import APNs
import Foundation
import Testing
import TestSupport
@testable import apns_send

/// The token memory against a plain reference: the Bloom filter path (a regular
/// file, read twice when needed) and the exact path (a pipe, read once) must hand
/// out exactly the lines the contract names, whatever the filter's size.
@Suite(.ownThread) struct TokenLinesTests {
    @Test(arguments: [1, 2, 16])
    func bloomAndExactPathsAgreeWithTheReference(bitsPerToken: Int) throws {
        let scratch = Scratch()
        let input = TokenFile.random(distinct: 5000, seed: UInt64(bitsPerToken))
        let tokens = scratch.file("t.txt", input.text)
        let results = scratch.file("r.jsonl", input.resumeRecords)
        let expected = input.reference()

        let resumed = try ResumedResults(path: results, format: nil)
        let file = try Handed(try TokenLines(path: tokens, resumed: resumed, bitsPerToken: bitsPerToken))
        #expect(file == expected)
        if bitsPerToken == 1 {
            #expect(file.deferred > 2000, "a 1-bit filter defers most lines: the second read is exercised")
        }

        let fifo = scratch.path("t.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let feeder = Thread { writeAll(input.text, toFIFO: fifo) }
        feeder.start()
        let pipe = try Handed(try TokenLines(path: fifo, resumed: resumed))
        #expect(pipe == expected)
        #expect(pipe.deferred == 0, "a pipe cannot be read twice: the exact memory is used")
    }

    /// The comment in BloomFilter.swift quotes this rate.
    @Test func sixteenBitsPerTokenDeferFewerThanHalfAPercent() throws {
        let scratch = Scratch()
        let n = 200_000
        let text = (0..<n).map { TokenFile.token($0, seed: 99) }.joined(separator: "\n")
        let lines = try TokenLines(path: scratch.file("t.txt", text), resumed: nil)
        var sent = 0
        while lines.next() != nil { sent += 1 }
        #expect(sent == n)
        #expect(lines.duplicates == 0)
        #expect(Double(lines.deferred) / Double(n) < 0.005, "\(lines.deferred) of \(n) deferred")
    }

    @Test func aFileThatShrinksBeforeTheSecondReadIsAReadFailureNotASilentDrop() throws {
        let scratch = Scratch()
        let input = TokenFile.random(distinct: 2000, seed: 7)
        let path = scratch.file("t.txt", input.text)
        let lines = try TokenLines(path: path, resumed: nil, bitsPerToken: 1)
        // The first read ends inside next(), which then opens the second: shrink the
        // file as soon as the first read has handed out its last line.
        var handed = 0
        let tokenLineCount = input.tokenLineCount
        while lines.tokenLines < tokenLineCount, lines.next() != nil { handed += 1 }
        try Data().write(to: URL(fileURLWithPath: path))
        while lines.next() != nil { handed += 1 }
        #expect(lines.failure != nil)
        #expect(handed + lines.duplicates < tokenLineCount, "deferred lines were not sent, and it says so")
    }
}

/// Opening a FIFO for writing waits for its reader (TokenLines opening it).
private func writeAll(_ text: String, toFIFO path: String) {
    let fd = open(path, O_WRONLY)
    guard fd >= 0 else { return }
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n <= 0 { break }
        offset += n
    }
    close(fd)
}

/// What a TokenLines handed out, as a comparable value (order aside: deferred
/// lines come after the first read).
private struct Handed: Equatable, CustomStringConvertible {
    var sent: [String: Int] = [:]
    var duplicates = 0
    var settled = 0
    var deferred = 0

    init(sent: [String: Int], duplicates: Int, settled: Int) {
        self.sent = sent
        self.duplicates = duplicates
        self.settled = settled
    }

    init(_ lines: TokenLines) throws {
        while let line = lines.next() { sent[line, default: 0] += 1 }
        try #require(lines.failure == nil)
        duplicates = lines.duplicates
        settled = lines.settled
        deferred = lines.deferred
    }

    static func == (a: Handed, b: Handed) -> Bool {
        a.sent == b.sent && a.duplicates == b.duplicates && a.settled == b.settled
    }

    var description: String { "\(sent.count) sent, \(duplicates) duplicates, \(settled) settled" }
}

/// A token file with every kind of line, and records of an earlier run for some of its tokens.
private struct TokenFile {
    var lines: [String] = []
    var records: [String] = []

    var text: String { lines.joined(separator: "\n") + "\n" }
    var resumeRecords: String { records.joined(separator: "\n") + "\n" }
    var tokenLineCount: Int { lines.filter { let t = $0.trimmingCharacters(in: .whitespaces); return !t.isEmpty && !t.hasPrefix("#") }.count }

    static func token(_ i: Int, seed: UInt64) -> String {
        var x = (UInt64(i) &+ seed &* 0x1_0000_0001) &* 0x9E37_79B9_7F4A_7C15
        return (0..<4).map { _ -> String in
            x ^= x >> 31; x &*= 0xBF58_476D_1CE4_E5B9; x ^= x >> 29
            let hex = String(x, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    static func random(distinct: Int, seed: UInt64) -> TokenFile {
        var rng = SplitMix(seed)
        let tokens = (0..<distinct).map { token($0, seed: seed) } + ["not-a-token", "xyz 123"]
        var file = TokenFile()
        for t in tokens { file.lines.append(t) }
        // Repeats in other spellings, blank lines, comments, spread through the file.
        for _ in 0..<(distinct / 2) {
            let t = tokens[Int(rng.next() % UInt64(tokens.count))]
            let spelled = rng.next() % 2 == 0 ? t.uppercased() : "  \(t)\t\r"
            file.lines.insert(spelled, at: Int(rng.next() % UInt64(file.lines.count + 1)))
        }
        for extra in ["", "   ", "# a comment", "#\(tokens[0])"] {
            file.lines.insert(extra, at: Int(rng.next() % UInt64(file.lines.count + 1)))
        }
        // Records of an earlier run: some settle their token, some do not.
        let answers: [(Int, String?)] = [(200, nil), (410, "Unregistered"), (400, "BadDeviceToken"),
                                         (503, "ServiceUnavailable"), (403, "InvalidProviderToken"), (0, nil)]
        for i in stride(from: 0, to: tokens.count, by: 3) {
            let (status, reason) = answers[Int(rng.next() % UInt64(answers.count))]
            let spelled = rng.next() % 2 == 0 ? tokens[i].uppercased() : tokens[i]
            var out: [UInt8] = []
            Record.jsonString(spelled, to: &out)
            let reasonJSON = reason.map { "\"\($0)\"" } ?? "null"
            file.records.append("{\"token\":\(String(decoding: out, as: UTF8.self)),\"status\":\(status),\"apns_id\":null,\"reason\":\(reasonJSON),\"timestamp\":null,\"attempts\":1}")
        }
        return file
    }

    /// The contract, spelled out plainly: first spelling of each distinct token (by
    /// lower case), unless a record settled it.
    func reference() -> Handed {
        var settledTokens = Set<String>()
        for r in records {
            let record = try! JSONSerialization.jsonObject(with: Data(r.utf8)) as! [String: Any]
            let status = record["status"] as! Int, reason = record["reason"] as? String
            if status == 200 || status == 410 || (status == 400 && reason == "BadDeviceToken") {
                settledTokens.insert((record["token"] as! String).lowercased())
            }
        }
        var seen = Set<String>(), sent: [String: Int] = [:], duplicates = 0, settled = 0
        for line in lines {
            let t = line.trimmingCharacters(in: CharacterSet(charactersIn: " \t\r"))
            if t.isEmpty || t.hasPrefix("#") { continue }
            guard seen.insert(t.lowercased()).inserted else { duplicates += 1; continue }
            if settledTokens.contains(t.lowercased()) { settled += 1; continue }
            sent[t, default: 0] += 1
        }
        return Handed(sent: sent, duplicates: duplicates, settled: settled)
    }
}

private struct SplitMix {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
