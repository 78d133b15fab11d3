import Foundation
import Synchronization

/// Wall-clock time as the store keeps it (milliseconds since 1970, UTC), and the
/// API's one time format: ISO-8601 UTC with milliseconds ("2026-11-22T21:28:00.123Z"),
/// what a Node/Postgres backend like the seed's returns for a timestamp column.
///
/// Every "now" of the service (fan-out, quiet hours, windows, claims, leases, the
/// log) comes from here, so tests can move time: `useTestClock(file:)` makes "now"
/// the Unix milliseconds written in that file, read at each call (see
/// `ServerConfig.testClockFile`, which only a test environment may set).
enum Clock {
    private static let testFile = Mutex<TestClockFile?>(nil)

    static var nowMillis: Int64 {
        if let file = testFile.withLock({ $0 }) { return file.now() }
        return realMillis
    }

    static var realMillis: Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Set once at start, before anything asks the time.
    static func useTestClock(file path: String) {
        testFile.withLock { $0 = TestClockFile(path: path) }
    }

    static var nowSeconds: Int64 { nowMillis / 1000 }

    static func iso8601(millis: Int64) -> String {
        let ms = Int(((millis % 1000) + 1000) % 1000)
        let seconds = (millis - Int64(ms)) / 1000
        var days = Int(seconds / 86400)
        var rem = Int(seconds % 86400)
        if rem < 0 { rem += 86400; days -= 1 }
        // Howard Hinnant's civil-from-days.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ n: Int, _ width: Int) -> String {
            let s = String(n)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(rem / 3600, 2)):\(pad(rem / 60 % 60, 2)):\(pad(rem % 60, 2)).\(pad(ms, 3))Z"
    }

    static func json(_ millis: Int64?) -> JSON {
        millis.map { .string(iso8601(millis: $0)) } ?? .null
    }
}

/// "Now" as a test writes it: decimal Unix milliseconds in a file (replaced whole,
/// by rename, so a read never sees half a number). Unreadable or not a number: the
/// last good value stands (or the real time, before there was one).
final class TestClockFile: Sendable {
    let path: String
    private let last = Mutex<Int64?>(nil)

    init(path: String) { self.path = path }

    func now() -> Int64 {
        if let text = try? String(contentsOfFile: path, encoding: .utf8),
           let millis = Int64(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            last.withLock { $0 = millis }
            return millis
        }
        return last.withLock { $0 } ?? Clock.realMillis
    }
}
