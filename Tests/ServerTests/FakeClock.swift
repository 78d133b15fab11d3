import Synchronization
@testable import Service
@testable import ServiceCore

/// "Now" as the test sets it, handed to the application in process: no file and
/// no process between. The same verbs as `TestClock`, so a test reads the same
/// either way.
final class FakeClock: ServiceClock {
    private let millis: Mutex<Int64>
    init(at iso: String) { millis = Mutex(TestClock.millis(iso)) }
    var nowMillis: Int64 { millis.withLock { $0 } }
    var now: Int64 { nowMillis }
    func set(_ millis: Int64) { self.millis.withLock { $0 = millis } }
    func set(_ iso: String) { set(TestClock.millis(iso)) }
    func advance(seconds: Double) { millis.withLock { $0 += Int64(seconds * 1000) } }
}
