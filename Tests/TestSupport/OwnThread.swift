import APNs
import Testing

/// A trait for a test that computes for seconds (a property test, a large generated
/// input): its body runs on a thread of its own, not on the cooperative pool.
///
/// The pool has one thread per core, two here, and every test's `await`s resume on
/// it. Two such tests on the pool at once leave every other test waiting for them;
/// on threads of their own they share the cores with the rest, as the kernel
/// schedules, and the pool stays free. (A child task the body starts runs there too.)
public struct OwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        guard testCase != nil else { return try await function() }   // a suite: its tests each get one
        try await withTaskExecutorPreference(SerialQueueExecutor(label: "tests.own-thread")) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// Runs the test (each test of a suite) on a thread of its own.
    public static var ownThread: Self { OwnThreadTrait() }
}
