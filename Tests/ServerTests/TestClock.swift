import Foundation
import TestSupport

/// The time apns-server-testclock reads (`--clock FILE`): Unix milliseconds
/// in a file, replaced whole by rename so the server never reads half a number.
/// Time moves only when the test says so: no sleeps, no races with the real clock.
final class TestClock: @unchecked Sendable {
    private let scratch = Scratch()
    let path: String
    private(set) var now: Int64

    init(at start: String) {
        path = scratch.path("clock")
        now = Self.millis(start)
        set(now)
    }

    /// "2026-03-08T04:00:00Z" as Unix milliseconds.
    static func millis(_ iso: String) -> Int64 {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = f.date(from: iso) ?? ISO8601DateFormatter().date(from: iso)!
        return Int64((date.timeIntervalSince1970 * 1000).rounded())
    }

    /// The log's spelling of an instant ("2026-03-08T12:00:00.000Z").
    static func iso(_ millis: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        f.timeZone = TimeZone(identifier: "UTC")
        return f.string(from: Date(timeIntervalSince1970: TimeInterval(millis) / 1000))
    }

    func set(_ millis: Int64) {
        now = millis
        let tmp = path + ".tmp"
        _ = FileManager.default.createFile(atPath: tmp, contents: Data(String(millis).utf8))
        precondition(rename(tmp, path) == 0, "cannot move the test clock: \(errno)")
    }

    func set(_ iso: String) { set(Self.millis(iso)) }
    func advance(seconds: Double) { set(now + Int64(seconds * 1000)) }
}
