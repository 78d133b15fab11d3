import Store
import Synchronization

/// This process's final outcomes over the last hour, second by second: what the
/// console charts (`GET /v1/stats/deliveries`). Kept in memory beside the
/// Prometheus counters, counted at the same place: a fixed ring of one slot per
/// second, so it costs the same whatever the rate, and nothing survives a restart.
package final class DeliveryRates: Sendable {
    package static let seconds = 3600

    private struct Ring {
        /// The second each slot holds; a slot whose second is not one of the last
        /// hour's is stale and reads as zero.
        var second = [Int64](repeating: -1, count: DeliveryRates.seconds)
        var delivered = [Int](repeating: 0, count: DeliveryRates.seconds)
        var failed = [Int](repeating: 0, count: DeliveryRates.seconds)
        /// Failures by APNs' reason, per slot (few reasons in any one second).
        var reasons = [[String: Int]](repeating: [:], count: DeliveryRates.seconds)
    }

    private let ring = Mutex(Ring())
    private let clock: any ServiceClock

    init(clock: any ServiceClock = SystemClock()) {
        self.clock = clock
    }

    func record(delivered: Bool, reason: String?, count: Int = 1) {
        let now = clock.nowSeconds
        ring.withLock { ring in
            let i = Self.slot(now)
            if ring.second[i] != now {
                ring.second[i] = now
                ring.delivered[i] = 0
                ring.failed[i] = 0
                ring.reasons[i] = [:]
            }
            if delivered {
                ring.delivered[i] += count
            } else {
                ring.failed[i] += count
                ring.reasons[i][reason ?? "Unknown", default: 0] += count
            }
        }
    }

    package struct Snapshot: Sendable {
        /// The newest second counted (now); the arrays run oldest first and end at it.
        package var end: Int64
        package var delivered: [Int]
        package var failed: [Int]
        /// Failures by reason over the whole window.
        package var failedByReason: [String: Int]
    }

    /// The last `seconds` seconds up to now, oldest first.
    package func snapshot(seconds: Int = DeliveryRates.seconds) -> Snapshot {
        let now = clock.nowSeconds
        let span = min(max(seconds, 1), Self.seconds)
        return ring.withLock { ring in
            var out = Snapshot(end: now, delivered: [], failed: [], failedByReason: [:])
            out.delivered.reserveCapacity(span)
            out.failed.reserveCapacity(span)
            for second in (now - Int64(span) + 1)...now {
                let i = Self.slot(second)
                guard ring.second[i] == second else {
                    out.delivered.append(0)
                    out.failed.append(0)
                    continue
                }
                out.delivered.append(ring.delivered[i])
                out.failed.append(ring.failed[i])
                for (reason, n) in ring.reasons[i] { out.failedByReason[reason, default: 0] += n }
            }
            return out
        }
    }

    private static func slot(_ second: Int64) -> Int {
        Int(((second % Int64(seconds)) + Int64(seconds)) % Int64(seconds))
    }
}
