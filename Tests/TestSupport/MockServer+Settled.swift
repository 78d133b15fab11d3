import APNsMock
import Foundation

extension MockServer {
    /// The statistics once `settled` holds of them. The mock counts a close or a failed
    /// handshake on its loop thread, after its bytes went out: a client that has exited
    /// may be ahead of that count, and a loaded machine runs the loop late. So the count
    /// is awaited, not sampled; the deadline only guards a hang.
    public func statistics(once settled: (MockStatistics) -> Bool, within seconds: TimeInterval = 60) -> MockStatistics {
        let deadline = Date().addingTimeInterval(seconds)
        var stats = statistics()
        while !settled(stats) && Date() < deadline {
            usleep(10_000)
            stats = statistics()
        }
        return stats
    }

    /// The statistics once no connection is open.
    public func statisticsWhenIdle(within seconds: TimeInterval = 60) -> MockStatistics {
        statistics(once: { $0.connectionsCurrent == 0 }, within: seconds)
    }
}
