import Foundation
import Service
import ServiceCore
import Synchronization

/// "Now" as a test writes it: decimal Unix milliseconds in a file (replaced whole,
/// by rename, so a read never sees half a number), read at each call. Unreadable or
/// not a number: the last good value stands (or the real time, before there was one).
final class FileClock: ServiceClock {
    let path: String
    private let last = Mutex<Int64?>(nil)

    init(path: String) { self.path = path }

    var nowMillis: Int64 {
        if let text = try? String(contentsOfFile: path, encoding: .utf8),
           let millis = Int64(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            last.withLock { $0 = millis }
            return millis
        }
        return last.withLock { $0 } ?? SystemClock().nowMillis
    }
}
