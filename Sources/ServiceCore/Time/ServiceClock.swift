import Foundation

/// Where the service reads "now": wall-clock milliseconds since 1970, UTC, as the
/// store keeps time. Every "now" of the service (fan-out, quiet hours, windows,
/// claims, leases, the log) comes from the clock its dependencies hand in, so a
/// test can move time by handing in its own.
public protocol ServiceClock: Sendable {
    var nowMillis: Int64 { get }
}

extension ServiceClock {
    package var nowSeconds: Int64 { nowMillis / 1000 }
}

/// The real time: what a deployed server runs on.
public struct SystemClock: ServiceClock {
    public init() {}

    public var nowMillis: Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
