import Foundation
import Store

/// What an app does with a notification that arrives in a user's quiet hours
/// (`quiet_hours` in its config; silent when not set).
public enum QuietHoursMode: String, Sendable {
    /// Delivered at once, without sound, `interruption-level: passive`.
    case silent
    /// Held in the outbox until the quiet hours end (one per device and collapse id,
    /// the latest winning).
    case `defer`
}

/// A user's quiet hours, as saved through the preferences endpoints: a daily window
/// of local wall-clock time (`quietHoursStart` to `quietHoursEnd`, "HH:mm", the end
/// excluded) in the user's IANA `timeZone`. A start after the end crosses midnight
/// ("22:00" to "08:00"). Local time is what counts, through daylight-saving changes:
/// the window always ends at the end's wall-clock time, however many real hours
/// that day has (Foundation's calendar with the system's tz database decides).
package struct QuietHours: Sendable, Equatable {
    static let enabledKey = "quietHoursEnabled"
    static let startKey = "quietHoursStart"
    static let endKey = "quietHoursEnd"
    package static let zoneKey = "timeZone"
    /// In the order GET lists them.
    package static let keys = [enabledKey, startKey, endKey, zoneKey]
    /// What a user who saved nothing has: off, and the seed's 22:00 to 08:00.
    package static let defaults: [String: PreferenceValue] = [enabledKey: false, startKey: "22:00", endKey: "08:00", zoneKey: "UTC"]

    /// Minutes after local midnight.
    var start: Int
    var end: Int
    package var zone: TimeZone

    /// The user's quiet hours, or nil when they are off (or empty: start == end).
    package init?(preferences: [String: PreferenceValue]) {
        guard preferences[Self.enabledKey]?.bool == true else { return nil }
        func text(_ key: String) -> String { preferences[key]?.text ?? Self.defaults[key]!.text! }
        guard let start = Self.minutes(text(Self.startKey)), let end = Self.minutes(text(Self.endKey)), start != end,
              let zone = TimeZone(identifier: text(Self.zoneKey))
        else { return nil }
        self.init(start: start, end: end, zone: zone)
    }

    init(start: Int, end: Int, zone: TimeZone) {
        self.start = start
        self.end = end
        self.zone = zone
    }

    static let ianaZones = Set(TimeZone.knownTimeZoneIdentifiers).union(["UTC"])

    /// Where the system's tz database lies (`TZDIR`, as the C library reads it).
    static let zoneDirectory = ProcessInfo.processInfo.environment["TZDIR"].flatMap { $0.isEmpty ? nil : $0 }
        ?? "/usr/share/zoneinfo"

    /// A name of the system's tz database: Foundation's list, or a zone file under
    /// `zoneDirectory`. On Linux Foundation's list lacks some canonical names
    /// ("Asia/Kolkata") and most of the backward links that the tz database
    /// itself ships, which users' devices report all the same.
    static func isZoneName(_ name: String) -> Bool {
        if ianaZones.contains(name) { return true }
        // A relative path of the tz database's own spelling: nothing that could
        // leave the directory, not its `posix/` and `right/` copies, and not the
        // files that stand for the machine's own zone.
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !name.isEmpty, name.utf8.count <= 64, !name.hasPrefix("posix/"), !name.hasPrefix("right/"),
              name != "localtime", name != "posixrules",
              parts.allSatisfy({ part in
                  !part.isEmpty && part.first != "." && part.utf8.allSatisfy { c in
                      (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)
                          || c == UInt8(ascii: "_") || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
                  }
              })
        else { return false }
        // A zone file starts "TZif" (RFC 8536); the directory also holds tables.
        guard let file = FileHandle(forReadingAtPath: zoneDirectory + "/" + name) else { return false }
        defer { try? file.close() }
        guard let magic = try? file.read(upToCount: 4) else { return false }
        return Array(magic) == Array("TZif".utf8)
    }

    /// "HH:mm" (00:00 to 23:59, two digits each) as minutes after midnight.
    static func minutes(_ text: String) -> Int? {
        let u = Array(text.utf8)
        guard u.count == 5, u[2] == UInt8(ascii: ":"),
              [u[0], u[1], u[3], u[4]].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        let h = Int(u[0] - 0x30) * 10 + Int(u[1] - 0x30), m = Int(u[3] - 0x30) * 10 + Int(u[4] - 0x30)
        guard h < 24, m < 60 else { return nil }
        return h * 60 + m
    }

    /// Checks one quiet-hours key of a preferences update; the message is the 400's.
    package static func check(_ key: String, _ value: JSON) -> Result<PreferenceValue, Invalid> {
        switch key {
        case enabledKey:
            guard let flag = value.boolValue else { return .failure(Invalid("preference '\(key)' must be true or false")) }
            return .success(.bool(flag))
        case startKey, endKey:
            guard let text = value.stringValue, minutes(text) != nil else {
                return .failure(Invalid("preference '\(key)' must be a time \"HH:mm\" (00:00 to 23:59)"))
            }
            return .success(.text(text))
        default:
            // An IANA name ("Europe/London") the system's tz database has; not the
            // abbreviations and offsets Foundation also takes ("EST", "GMT+2").
            guard let text = value.stringValue, isZoneName(text), TimeZone(identifier: text) != nil
            else { return .failure(Invalid("preference '\(key)' must be an IANA time zone (e.g. \"Europe/London\")")) }
            return .success(.text(text))
        }
    }

    /// When `now` (ms since 1970) falls in the quiet hours: the instant they end,
    /// the first one after `now` at which the local time reads `end`. Nil outside them.
    package func end(ifQuietAt now: Int64) -> Int64? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let date = Date(timeIntervalSince1970: TimeInterval(now) / 1000)
        let local = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        let minute = local.hour! * 60 + local.minute!
        let quiet: Bool
        let endsTomorrow: Bool
        if start < end {
            quiet = minute >= start && minute < end
            endsTomorrow = false
        } else {
            quiet = minute >= start || minute < end
            endsTomorrow = minute >= start
        }
        guard quiet else { return nil }
        // The day the window ends, by the calendar (noon is never skipped by a DST change).
        var day = local
        if endsTomorrow {
            guard let noon = calendar.date(from: DateComponents(year: local.year, month: local.month, day: local.day, hour: 12)),
                  let next = calendar.date(byAdding: .day, value: 1, to: noon)
            else { return nil }
            day = calendar.dateComponents([.year, .month, .day], from: next)
        }
        // A wall-clock end that a spring-forward skips is read past the gap (02:30 is
        // 03:30 that day); one that a fall-back repeats is its first occurrence.
        guard let ends = calendar.date(from: DateComponents(year: day.year, month: day.month, day: day.day,
                                                            hour: end / 60, minute: end % 60))
        else { return nil }
        let millis = Int64((ends.timeIntervalSince1970 * 1000).rounded())
        return millis > now ? millis : nil
    }
}
