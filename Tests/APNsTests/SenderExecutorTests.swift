import APNsMock
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import APNs

/// A batch consumed on the sender executor: its loop runs on the thread that reads and
/// writes the connection, and still gets one result per token.
@Suite struct SenderExecutorTests {
    @Test("A batch consumed on the sender executor runs on the sender thread and gets every result",
          arguments: Transport.allCases)
    func aBatchRunsOnTheSenderThread(transport: Transport) async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: transport)
        let lane = client.dispatcher.defaultLane
        let tokens = Harness.tokens(transport == .curl ? 300 : 3000)
        let executor = try client.senderExecutor()
        let (delivered, elsewhere) = await withTaskExecutorPreference(executor) {
            var delivered = 0, elsewhere = 0
            for await result in client.send(Harness.notification(), to: tokens) {
                if result.isDelivered { delivered += 1 }
                if !lane.isSenderThread { elsewhere += 1 }
            }
            return (delivered, elsewhere)
        }
        #expect(delivered == tokens.count)
        #expect(elsewhere == 0, "\(elsewhere) of \(tokens.count) results were taken off the sender thread")
        #expect(!lane.isSenderThread)
        await client.shutdown()
        mock.stop()
    }

    /// Once the lane is destroyed its thread takes no more jobs: they run on a global
    /// queue, so a task that prefers the executor still runs to its end (were they
    /// dropped, this test would never end).
    @Test("After shutdown, jobs for the sender executor run elsewhere")
    func jobsRunAfterShutdown() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let executor = try client.senderExecutor()
        await client.shutdown()
        let steps = await withTaskExecutorPreference(executor) {
            var steps = 0
            for _ in 0..<3 {
                try? await Task.sleep(for: .milliseconds(1))   // each resumption is a job for the executor
                steps += 1
            }
            return steps
        }
        #expect(steps == 3)
        mock.stop()
    }
}
