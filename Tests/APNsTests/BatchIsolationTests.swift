import APNsMock
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import APNs

/// A batch's results are handed over where the loop runs: a result already there
/// costs no hop, so a loop on an actor (the main actor of a main.swift) runs at
/// the engine's pace. Counted on an actor whose executor counts every job it is given.
@Suite struct BatchIsolationTests {
    /// A serial executor that counts the jobs enqueued on it: each is one hop onto the actor.
    final class CountingExecutor: SerialExecutor {
        let queue = DispatchQueue(label: "counting-executor")
        let enqueued = Atomic<Int>(0)

        func enqueue(_ job: consuming ExecutorJob) {
            enqueued.add(1, ordering: .relaxed)
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }
    }

    actor Consumer {
        let executor = CountingExecutor()
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        /// Reads the whole batch here; returns how many results and how many hops onto this actor it took.
        func drain(_ client: APNsClient, _ tokens: [String]) async -> (results: [DeliveryResult], hops: Int) {
            let before = executor.enqueued.load(ordering: .relaxed)
            var results: [DeliveryResult] = []
            for await r in client.send(Harness.notification(), to: tokens) { results.append(r) }
            return (results, executor.enqueued.load(ordering: .relaxed) - before)
        }

        func drainMessages(_ client: APNsClient, _ tokens: [String]) async -> (count: Int, hops: Int) {
            let before = executor.enqueued.load(ordering: .relaxed)
            var count = 0
            let messages = tokens.enumerated().map { Message(token: $1, notification: Harness.notification(), context: $0) }
            for await r in client.send(messages) where r.context >= 0 { count += 1 }
            return (count, executor.enqueued.load(ordering: .relaxed) - before)
        }
    }

    /// Malformed tokens get their results without a request: every one is ready as
    /// soon as the loop asks, so the loop never has to wait, and must never hop.
    @Test func readyResultsAreHandedOverWithoutAHop() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let consumer = Consumer()
        let bad = (0..<1000).map { "not-a-token-\($0)" }
        let (results, hops) = await consumer.drain(client, bad)
        #expect(results.count == 1000 && results.allSatisfy { $0.reason == .badDeviceToken })
        #expect(hops == 0, "\(hops) hops onto the loop's actor for 1000 ready results")
        let (count, messageHops) = await consumer.drainMessages(client, bad)
        #expect(count == 1000 && messageHops == 0, "\(messageHops) hops for 1000 ready message results")
        await client.shutdown()
    }

    /// Sent for real: every result arrives on the actor, each wake-up serving all
    /// that came meanwhile (how many that is depends on the machine's load).
    @Test func aLoopOnAnActorGetsEveryResult() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let tokens = Harness.tokens(5000)
        let (results, _) = await Consumer().drain(client, tokens)
        await client.shutdown()
        #expect(results.count == tokens.count && results.allSatisfy { $0.status == 200 })
        #expect(Set(results.map(\.token)) == Set(tokens))
    }

    /// The README's loop on the main actor, as top-level code runs it.
    @MainActor @Test func aLoopOnTheMainActorGetsEveryResult() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let tokens = Harness.tokens(2000)
        var delivered = 0
        for await r in client.send(Harness.notification(), to: tokens) {
            MainActor.assertIsolated()
            if r.status == 200 { delivered += 1 }
        }
        await client.shutdown()
        #expect(delivered == tokens.count)
    }
}
