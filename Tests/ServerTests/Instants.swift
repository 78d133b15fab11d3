import Foundation

/// Instants as the tests write them and the API spells them, and the machine's
/// real time, which is the release `apns-server`'s only clock: the tests that run
/// it as a child process (a `kill -9` is the point) wait for real instants some
/// seconds ahead instead of moving time.
enum Instants {
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

    /// Now, in Unix milliseconds (rounded down, as the server's clock reads it).
    static var now: Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

    /// When the mock received a request, in Unix milliseconds. Its record is on
    /// CLOCK_MONOTONIC, which this process reads too, and the wall clock runs at the
    /// same rate unless someone sets it: the two are read one after the other, so the
    /// answer may be off by the time between the reads (microseconds) and the
    /// rounding, never by more than `skew`.
    static func millis(received: Duration) -> Int64 {
        let since = ScaleOut.monotonicNow() - received
        let wall = Date().timeIntervalSince1970
        let ago = Double(since.components.seconds) + Double(since.components.attoseconds) / 1e18
        return Int64(((wall - ago) * 1000).rounded(.down))
    }

    /// What `millis(received:)` may be off by, either way: a request the server sent
    /// at `t` reads no earlier than `t - skew`.
    static let skew: Int64 = 2

    /// How late past its time a held or scheduled send may reach the mock: the workers
    /// poll every 20 to 250 ms here, and a send takes milliseconds; the rest is room
    /// for a machine loaded by the rest of the suite.
    static let lateness: Int64 = 10_000

    /// The first whole minute at least `lead` milliseconds after now. Quiet hours are
    /// whole minutes of local time ("HH:mm"), and every zone in use is a whole number of
    /// minutes from UTC: their end is always such an instant.
    static func wholeMinute(atLeast lead: Int64) -> Int64 {
        let earliest = now + lead
        return (earliest + 59_999) / 60_000 * 60_000
    }

    /// "HH:mm" of the instant in the named zone: how a user's preferences write it.
    static func wallClock(_ millis: Int64, in zone: String) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: zone)!
        let parts = calendar.dateComponents([.hour, .minute], from: Date(timeIntervalSince1970: TimeInterval(millis) / 1000))
        return String(format: "%02d:%02d", parts.hour!, parts.minute!)
    }

    /// Preferences whose quiet hours (in `zone`, which must keep one offset all year:
    /// a daylight-saving change inside the hour would move the window) began an hour
    /// before `end` and end at `end`, a whole minute: a notification for the user now
    /// is deferred to `end`.
    static func quietHours(endingAt end: Int64, in zone: String) -> String {
        precondition(end % 60_000 == 0, "quiet hours end on a whole minute")
        let start = wallClock(end - 3_600_000, in: zone), stop = wallClock(end, in: zone)
        return #"{"quietHoursEnabled":true,"quietHoursStart":"\#(start)","quietHoursEnd":"\#(stop)","timeZone":"\#(zone)"}"#
    }
}
