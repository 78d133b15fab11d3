import Foundation

/// The API's one time format: ISO-8601 UTC with milliseconds
/// ("2026-11-22T21:28:00.123Z"), what a Node/Postgres backend like the seed's
/// returns for a timestamp column, from the store's milliseconds since 1970.
package enum Timestamp {
    package static func iso8601(millis: Int64) -> String {
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

    package static func json(_ millis: Int64?) -> JSON {
        millis.map { .string(iso8601(millis: $0)) } ?? .null
    }

    /// The one reader of a time the API is given (`send_at`, a report's `at`):
    /// UNIX seconds (a number, fractions allowed), or RFC 3339 text,
    /// "2026-03-08T09:00:00Z" or "2026-03-08T09:00:00.250+05:30". Strict on
    /// purpose: Foundation's parser read "+5:30" as +05:00 (a send half an hour
    /// early), took "+99:00" and "2026-02-30" (as 2 March); here each is nil. Times
    /// before 1970 are nil too: the store counts milliseconds from then.
    /// Milliseconds; digits past them are dropped.
    package static func millis(_ value: JSON) -> Int64? {
        if case .number(let text) = value {
            guard let seconds = Double(text), seconds.isFinite, seconds >= 0, seconds < 1e11 else { return nil }
            return Int64((seconds * 1000).rounded(.down))
        }
        guard let text = value.stringValue else { return nil }
        return millis(rfc3339: text)
    }

    static func millis(rfc3339 text: String) -> Int64? {
        let u = Array(text.utf8)
        guard u.count >= 20, u.count <= 64 else { return nil }
        var i = 0
        func digits(_ n: Int) -> Int? {
            guard i + n <= u.count else { return nil }
            var v = 0
            for c in u[i..<(i + n)] {
                guard c >= 0x30 && c <= 0x39 else { return nil }
                v = v * 10 + Int(c - 0x30)
            }
            i += n
            return v
        }
        func expect(_ set: String) -> Bool {
            guard i < u.count, set.utf8.contains(u[i]) else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect("-"), let month = digits(2), expect("-"), let day = digits(2),
              expect("Tt"), let hour = digits(2), expect(":"), let minute = digits(2), expect(":"),
              let second = digits(2)
        else { return nil }
        var millis = 0
        if i < u.count, u[i] == UInt8(ascii: ".") {
            i += 1
            let start = i
            while i < u.count, u[i] >= 0x30 && u[i] <= 0x39 { i += 1 }
            guard i > start else { return nil }
            for (k, c) in u[start..<min(i, start + 3)].enumerated() {
                millis += Int(c - 0x30) * [100, 10, 1][k]
            }
        }
        var offsetMinutes = 0
        if expect("Zz") {
        } else if i < u.count, u[i] == UInt8(ascii: "+") || u[i] == UInt8(ascii: "-") {
            let sign = u[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let h = digits(2), expect(":"), let m = digits(2), h <= 23, m <= 59 else { return nil }
            offsetMinutes = sign * (h * 60 + m)
        } else {
            return nil
        }
        guard i == u.count, year >= 1970, (1...12).contains(month), day >= 1,
              day <= daysIn(month: month, year: year), hour <= 23, minute <= 59, second <= 59
        else { return nil }
        let seconds = Int64(days(year: year, month: month, day: day)) * 86400
            + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        guard seconds >= 0 else { return nil }
        return seconds * 1000 + Int64(millis)
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 (Howard Hinnant's days-from-civil).
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
