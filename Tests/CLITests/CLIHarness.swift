import APNsMock
import Foundation
import TestSupport
import Testing

/// What the CLI tests share: the built `apns-send`, a mock on the test PKI that
/// records every request, throw-away files, and the records read back.
enum CLI {
    static let pki = TestPKI.shared
    static let binary = Package.executable("apns-send")
    static let examples = Package.root.appendingPathComponent("examples")
    static let payload = examples.appendingPathComponent("payloads/quote_approved.json").path

    /// A mock that knows the test key, team and topic, and records requests.
    static func mock(_ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        var c = MockConfiguration(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey,
                                  authKeys: [pki.keyID: pki.keyPath], teamIDs: [pki.teamID], topics: [pki.topic])
        c.recordRequests = true
        tweak(&c)
        return try MockServer(c)
    }

    static func credentials() -> [String] {
        ["--key", pki.keyPath, "--key-id", pki.keyID, "--team-id", pki.teamID]
    }

    /// Topic, credentials, the mock's endpoint and the test CA: everything but the files.
    static func arguments(_ mock: MockServer) -> [String] {
        ["--topic", pki.topic] + credentials() + endpoint(mock)
    }

    static func endpoint(_ mock: MockServer) -> [String] {
        ["--endpoint", "https://127.0.0.1:\(mock.port)", "--cacert", pki.caFile]
    }

    /// Runs apns-send with the environment stripped of APNS_* (plus `environment`).
    /// Async, off the cooperative pool: a test blocked in waitpid would hold one of
    /// its few threads (two here) and stall every other test.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async -> ProcessResult {
        await TestSupport.run(binary, arguments, environment: cleanEnvironment().merging(environment) { $1 }, timeout: 60)
    }

    /// Without APNS_* and the proxy variables apns-send reads (a CI machine's proxy
    /// must not come between a test and its mock on loopback).
    static func cleanEnvironment() -> [String: String] {
        let proxyVariables: Set = ["https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"]
        return ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_") && !proxyVariables.contains($0.key) }
    }

    /// Deterministic, distinct, well-formed device tokens (TestSupport's).
    static func tokens(_ count: Int, seed: Int = 0) -> [String] { deterministicTokens(count, seed: seed) }

    /// The stderr lines, without empty ones.
    static func lines(_ text: String) -> [String] {
        text.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    }

    /// JSON text without insignificant white space, written independently of the library's compactor.
    static func compacted(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false, escaped = false
        for c in bytes {
            if inString {
                out.append(c)
                if escaped { escaped = false } else if c == UInt8(ascii: "\\") { escaped = true } else if c == UInt8(ascii: "\"") { inString = false }
            } else if c == UInt8(ascii: "\"") {
                inString = true
                out.append(c)
            } else if ![0x20, 0x09, 0x0A, 0x0D].contains(c) {
                out.append(c)
            }
        }
        return out
    }
}

/// One output record, with the raw line kept to check the key order.
struct Record {
    let line: String
    let token: String
    let status: Int
    let apnsID: String?
    let reason: String?
    let timestamp: Int64?
    let attempts: Int
    let error: String?
    /// `--messages` runs: the input line (1-based) and the message's id when it gave one.
    let inputLine: Int?
    let id: String?

    init(_ line: String) throws {
        self.line = line
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
        token = object["token"] as! String
        status = object["status"] as! Int
        apnsID = object["apns_id"] as? String
        reason = object["reason"] as? String
        timestamp = (object["timestamp"] as? NSNumber)?.int64Value
        attempts = object["attempts"] as! Int
        error = object["error"] as? String
        inputLine = object["line"] as? Int
        id = object["id"] as? String
        let keys = Set(object.keys)
        let six: Set = ["token", "status", "apns_id", "reason", "timestamp", "attempts"]
        precondition(keys.isSuperset(of: six) && keys.subtracting(six).isSubset(of: ["error", "line", "id"]),
                     "unexpected keys \(keys.sorted()) in \(line)")
    }

    /// The six keys in the contract's order, every one present (null when empty).
    var hasContractKeyOrder: Bool {
        let keys = [#"{"token":"#, #","status":"#, #","apns_id":"#, #","reason":"#, #","timestamp":"#, #","attempts":"#]
        guard line.hasPrefix(keys[0]) else { return false }
        var from = line.startIndex
        for key in keys {
            guard let r = line.range(of: key, range: from..<line.endIndex) else { return false }
            from = r.upperBound
        }
        return true
    }

    static func parse(_ stdout: String) throws -> [Record] {
        try stdout.split(separator: "\n").map { try Record(String($0)) }
    }
}

/// apns-send as a child process that a test can stop with a signal.
final class SendProcess: @unchecked Sendable {
    private let process = ChildProcess()
    private let errPipe = Pipe()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: CLI.binary)
        process.arguments = arguments
        process.environment = CLI.cleanEnvironment()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errPipe
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Polls `condition` every 10 ms; throws after `deadline` seconds.
    func waitUntil(deadline: TimeInterval, _ condition: () -> Bool) async throws {
        let end = Date().addingTimeInterval(deadline)
        while !condition() {
            if !process.isRunning { return }
            guard Date() < end else { throw TimeoutError() }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// Sends `signal` (nil: none) and waits for the exit; returns the status and stderr.
    func stop(_ signal: Int32?) async -> (Int32, String) {
        if let signal, process.isRunning { kill(process.processIdentifier, signal) }
        let data = await Task.detached { [errPipe] in errPipe.fileHandleForReading.readDataToEndOfFile() }.value
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    struct TimeoutError: Error {}
}

/// The series both resume tests run: apns-send again and again on one output file
/// (the first with --output, the rest with --resume), each stopped by the next
/// signal once the mock has seen a random number (1...`upTo`) more requests; a run
/// that finishes before its signal ends the series. Then one last run to the end.
///
/// The stop is decided on a thread of its own: a short run is over in a second, and
/// the suite's blocking tests can stall the async pool for longer than that.
enum StopAndResume {
    struct Outcome {
        /// "signal after N: status", one per stopped run.
        var runs: [String] = []
        var lastStatus: Int32 = 0
        var lastStderr = ""
    }

    static func run(_ mock: MockServer, arguments: [String], input: [String], output: String,
                    signals: [Int32], upTo maxRequests: UInt64,
                    onInterrupted: (_ run: Int, _ status: Int32, _ stderr: String) -> Void) async throws -> Outcome {
        var rng = SystemRandomNumberGenerator()
        var outcome = Outcome()
        for signal in signals {
            let files = outcome.runs.isEmpty ? ["--output", output] : ["--resume", output]
            let run = try SendProcess(arguments + files + input)
            let until = mock.statistics().requests + UInt64.random(in: 1...maxRequests, using: &rng)
            let stopper = Thread {
                while run.isRunning && mock.statistics().requests < until { usleep(1_000) }
                if run.isRunning { kill(run.pid, signal) }
            }
            stopper.start()
            let (status, stderr) = await run.stop(nil)
            outcome.runs.append("\(signal) after \(until): \(status)")
            if signal != SIGKILL && stderr.contains("interrupted") { onInterrupted(outcome.runs.count, status, stderr) }
            if !stderr.contains("interrupted") && signal != SIGKILL { break }   // finished before the signal
        }
        let last = try SendProcess(arguments + ["--resume", output] + input)
        (outcome.lastStatus, outcome.lastStderr) = await last.stop(nil)
        return outcome
    }

    /// What an interrupted run must say: how to go on.
    static func expectResumeHint(run: Int, stderr: String, output: String,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        let hint = run == 1 ? "--resume \(output)" : "run the same command again"
        #expect(stderr.contains(hint), "\(stderr)", sourceLocation: sourceLocation)
    }
}
