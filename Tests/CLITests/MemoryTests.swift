import APNsMock
import Foundation
import Synchronization
import Testing
import TestSupport

/// Bounded everything (issue #5, item 3): a long run against a slow mock keeps the
/// in-flight window full for its whole length, so every queue is at its fullest;
/// apns-send's resident memory, read from /proc while it runs, must stay flat.
/// 200,000 tokens here; 1,000,000 under `make soak` (APNS_SOAK=1).
@Suite(.ownThread) struct MemoryTests {
    @Test func residentMemoryStaysFlatWhileALongRunSends() async throws {
        let soak = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1"
        let count = soak ? 1_000_000 : 200_000
        let mock = try CLI.mock {
            $0.latency = .milliseconds(20)
            $0.recordRequests = false
        }
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(count, seed: 31)
        let file = scratch.file("t.txt", tokens.joined(separator: "\n") + "\n")
        let run = try SendProcess(CLI.arguments(mock) + ["--output", scratch.path("o.jsonl"), CLI.payload, file])
        let (warmKB, peakKB) = try await Self.sample(run, mock: mock, count: count)
        print("memory: \(count) tokens, warm \(warmKB / 1024) MB, peak \(peakKB / 1024) MB")
    }

    /// `--messages` (issue #9): a file of 100,000 lines, each with its own payload,
    /// is streamed, never loaded; a payload lives only while its message is in flight.
    @Test func residentMemoryStaysFlatWhileAMessagesFileIsSent() async throws {
        let count = ProcessInfo.processInfo.environment["APNS_SOAK"] == "1" ? 1_000_000 : 100_000
        let mock = try CLI.mock {
            $0.latency = .milliseconds(10)
            $0.recordRequests = false
        }
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(count, seed: 32)
        let pad = String(repeating: "p", count: 300)
        let text = tokens.enumerated().map { i, t in
            #"{"token":"\#(t)","payload":{"aps":{"alert":"message \#(i) \#(pad)"}},"id":"evt-\#(i)"}"#
        }.joined(separator: "\n") + "\n"
        let file = scratch.file("m.jsonl", text)
        let run = try SendProcess(CLI.arguments(mock) + ["--output", scratch.path("o.jsonl"), "--messages", file])
        let (warmKB, peakKB) = try await Self.sample(run, mock: mock, count: count)
        print("memory: \(count) messages (\(text.utf8.count / 1_048_576) MB file), warm \(warmKB / 1024) MB, peak \(peakKB / 1024) MB")
    }

    /// Samples (requests answered so far, resident kB) every 20 ms until the process
    /// exits, on a thread of its own: the suite's blocking tests can stall the async
    /// pool for seconds, and a sampler on it would miss the run. Checks the run
    /// delivered all `count` and stayed flat: once a tenth are answered (the window
    /// full, the buffers at size), the rest of the run adds at most a few MB. (The
    /// exact fingerprint set the Bloom filter replaced added 12 MB at 200k tokens.)
    static func sample(_ run: SendProcess, mock: MockServer, count: Int) async throws -> (warmKB: Int, peakKB: Int) {
        let sampled = Mutex<[(done: UInt64, kB: Int)]>([])
        let sampler = Thread { [pid = run.pid] in
            while let kB = residentKilobytes(pid) {
                let done = mock.statistics().requests
                sampled.withLock { $0.append((done, kB)) }
                usleep(20_000)
            }
        }
        sampler.start()
        let (status, stderr) = await run.stop(nil)
        while !sampler.isFinished { try await Task.sleep(for: .milliseconds(20)) }
        let samples = sampled.withLock { $0 }
        #expect(status == 0, "\(stderr)")
        #expect(mock.statistics().byStatus[200] == UInt64(count))
        let warm = samples.first { $0.done >= UInt64(count / 10) }
        let warmKB = try #require(warm, "sampled \(samples.count) times").kB
        let peakKB = samples.map(\.kB).max() ?? 0
        let growthMB = Double(peakKB - warmKB) / 1024
        #expect(samples.count >= 20, "the run was sampled throughout")
        #expect(growthMB < 6, "resident memory grew \(growthMB) MB after warm-up (\(warmKB / 1024) → \(peakKB / 1024) MB)")
        return (warmKB, peakKB)
    }
}

/// VmRSS of a live process; nil once it is gone (or a zombie, which has no VmRSS line).
private func residentKilobytes(_ pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
    return Int(line.split(separator: " ").dropFirst().first ?? "")
}
