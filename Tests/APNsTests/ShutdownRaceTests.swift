import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// issue #13, defect 2: `shutdown()` used to free the C sender while a batch still
/// held tokens; the batch then submitted into freed memory (AddressSanitizer showed
/// the heap-use-after-free). Now destroy stops every further C call first (set
/// authorization under the lane's lock, a submit by the flag `Lane.transmit` checks)
/// and waits out the submits under way: the rest end with status 0 and the
/// shut-down error. scripts/sanitize.sh runs this suite under ASan.
@Suite struct ShutdownRaceTests {
    /// The scenario: `maxInFlight: 1`, 6 tokens; take one result, wait
    /// 300 ms, `shutdown()`, then keep iterating.
    @Test(arguments: Transport.allCases)
    func aBatchIteratedAfterShutdownEndsWithTheShutDownError(transport: Transport) async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: transport, maxInFlight: 1)
        let tokens = Harness.tokens(6)
        var iterator = client.send(Harness.notification(), to: tokens).makeAsyncIterator()
        var results = [try #require(await iterator.next())]
        try await Task.sleep(for: .milliseconds(300))
        await client.shutdown()
        while let r = await iterator.next() { results.append(r) }

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results[0].status == 200)
        let after = results.filter { $0.status != 200 }
        #expect(!after.isEmpty, "tokens were left when the client shut down")
        #expect(after.allSatisfy { $0.status == 0 && $0.error == APNsError.shutDown.description && $0.attempts == 0 })
        for r in after { #expect(mock.attempts(for: r.token) == 0) }
    }

    /// A provider-token refresh (ExpiredProviderToken) and its resend, racing a
    /// shutdown: the refresh and the resend reach C only while the sender lives.
    @Test func aTokenRefreshRacingShutdownNeverReachesAFreedSender() async throws {
        let mock = try Harness.mock { $0.expireFirstProviderTokenAfter = 1; $0.latency = .milliseconds(5) }
        let client = try Harness.client(mock, transport: .nghttp2, maxInFlight: 4)
        let tokens = Harness.tokens(400)
        let task = Task { await client.sendAll(Harness.notification(), to: tokens) }
        try await Task.sleep(for: .milliseconds(30))
        await client.shutdown()
        let results = await task.value
        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 || ($0.status == 0 && $0.error == APNsError.shutDown.description) })
        #expect(client.dispatcher.defaultLane.audit.busy == 0)
    }

    /// The C submit is made outside the lane's lock (issue #9): a lane destroyed while
    /// thousands of callers submit, with no close and no drain first, waits out the
    /// submits under way and stops the rest, so none reaches the freed sender (ASan
    /// would report it), and every caller still ends with exactly one result.
    @Test func aLaneDestroyedUnderConcurrentSubmitsNeverReachesAFreedSender() async throws {
        // The mock answers the connection's first 1,000 requests, then advertises room
        // for none: whenever the destroy comes, requests are outstanding and callers wait
        // in line, so some end by the lane going, whatever the machine's speed.
        let mock = try Harness.mock {
            $0.latency = .milliseconds(50)
            $0.settingsDrop = .init(after: 1_000, to: 0)
        }
        // A connect timeout far past a loaded machine's TLS handshake: without a first
        // connection no caller gets its 200 and the race is never run.
        let client = try Harness.client(port: mock.port, transport: .nghttp2, maxInFlight: 50,
                                        connectTimeout: .seconds(60))
        let lane = client.dispatcher.defaultLane
        let tokens = Harness.tokens(3_000)
        let note = Harness.notification()
        // Destroyed once 200 callers have their 200 (answers then flow, and callers take
        // the slots they free), from a thread of its own woken by those events: the task
        // pool of a full `swift test` can be held up for seconds.
        let answered = DispatchSemaphore(value: 0)
        let destroyed = DispatchSemaphore(value: 0)
        Thread {
            let deadline = DispatchTime.now() + 120      // a hang guard: too few 200s fail below
            var seen = 0
            while seen < 200, answered.wait(timeout: deadline) == .success { seen += 1 }
            lane.destroy()
            destroyed.signal()
        }.start()
        let tasks = tokens.map { token in
            Task {
                let result = try? await client.send(note, to: token)
                if result?.status == 200 { answered.signal() }
                return result
            }
        }
        var results: [DeliveryResult] = []
        for task in tasks { if let r = await task.value { results.append(r) } }
        await offPool { destroyed.wait() }
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.contains { $0.status == 200 }, "answered before the lane went")
        #expect(results.contains { $0.status == 0 }, "ended by the lane going")
        #expect(results.allSatisfy { $0.status == 200 || $0.status == 0 })
        #expect(lane.audit.busy == 0)
        #expect(lane.audit.slotsHoldingMessages == 0)
    }

    /// Callers waiting for room when the client shuts down end at once with
    /// `.shutDown`; those in flight get their answers.
    @Test func callersWaitingForRoomEndWhenTheClientShutsDown() async throws {
        // A second an answer: the line (200 callers, 10 slots) lasts 20 s, far longer
        // than a loaded machine can take between seeing it and shutting down.
        let mock = try Harness.mock { $0.latency = .seconds(1) }
        let client = try Harness.client(mock, transport: .nghttp2, maxInFlight: 5)
        let tokens = Harness.tokens(200)
        let note = Harness.notification()
        let outcomes = await withTaskGroup(of: (String, Int?).self) { group in
            for token in tokens {
                group.addTask {
                    // A task the machine starts only after the shutdown is a send after it:
                    // refused with .shutDown (-1 here), as the last line checks on its own.
                    do { return (token, try await client.send(note, to: token).status) }
                    catch APNsError.shutDown { return (token, -1) }
                    catch { return (token, nil) }
                }
            }
            // Shut down with callers in line, whatever the machine's speed.
            while client.dispatcher.defaultLane.audit.waiters == 0 { try? await Task.sleep(for: .milliseconds(1)) }
            await client.shutdown()
            var all: [(String, Int?)] = []
            for await o in group { all.append(o) }
            return all
        }
        #expect(outcomes.count == tokens.count)
        #expect(outcomes.contains { $0.1 == 200 }, "in flight when it shut down: answered")
        #expect(outcomes.contains { $0.1 == 0 }, "in line when it shut down: ended at once")
        #expect(outcomes.allSatisfy { $0.1 == 200 || $0.1 == 0 || $0.1 == -1 }, "\(outcomes.filter { $0.1 == nil }.count) threw")
        await #expect(throws: APNsError.shutDown) { try await client.send(note, to: tokens[0]) }
    }
}

import Logging
import ServiceLifecycle

/// issue #9: the client is a `Service`; a graceful shutdown of its group drains it.
@Suite struct ServiceLifecycleTests {
    @Test func aGracefulShutdownOfTheGroupDrainsTheClient() async throws {
        let mock = try Harness.mock { $0.latency = .milliseconds(50) }
        let client = try Harness.client(mock, transport: .nghttp2)
        let group = ServiceGroup(services: [client], logger: Logger(label: "test"))
        let running = Task { try await group.run() }
        let tokens = Harness.tokens(500)
        let sending = Task { await client.sendAll(Harness.notification(), to: tokens) }
        try await Task.sleep(for: .milliseconds(20))
        await group.triggerGracefulShutdown()
        try await running.value
        let results = await sending.value
        #expect(results.count == tokens.count, "one result per token, sent or not")
        #expect(results.filter { $0.attempts > 0 }.allSatisfy { $0.status == 200 }, "what was in flight was answered")
        await #expect(throws: APNsError.shutDown) { try await client.send(Harness.notification(), to: tokens[0]) }
    }
}
