import Synchronization
import Foundation
import Testing
import TestSupport
@testable import Store

/// SQLite's own mechanics: a writer that waits past the busy timeout. The scenarios
/// both stores share with several instances (claim races, migrating at once) are
/// SeveralInstancesTests.
@Suite struct ConcurrencyTests {
    @Test func aWriterThatWaitsPastTheBusyTimeoutSaysTheDatabaseIsLocked() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let holder = try await makeStore(scratch)
        let waiter = try SQLiteStore(path: holder.path, busyTimeout: .milliseconds(50))
        let (locked, signal) = AsyncStream<Void>.makeStream()
        let release = Mutex(false)
        let held = Task {
            try await holder.holdWriteLock(held: { signal.yield() }, until: { release.withLock { $0 } })
        }
        for await _ in locked { break }
        let error = await #expect(throws: StoreError.self) {
            _ = try await waiter.claim(worker: "w", limit: 1, leaseMillis: 1, now: 1)
        }
        #expect(error?.description == "claim: database is locked")
        // Reads do not wait for the writer (WAL).
        #expect(try await waiter.outboxDepth() == 0)
        release.withLock { $0 = true }
        try await held.value
    }
}
