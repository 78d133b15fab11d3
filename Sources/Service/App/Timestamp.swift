import Foundation

/// The API's one time format: ISO-8601 UTC with milliseconds
/// ("2026-11-22T21:28:00.123Z"), what a Node/Postgres backend like the seed's
/// returns for a timestamp column, from the store's milliseconds since 1970.
enum Timestamp {
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
