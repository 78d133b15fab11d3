import Synchronization
@testable import Service
@testable import ServiceCore

/// "Now" as the test sets it, handed to the application in process: time moves
/// only when the test says so, with no sleeps and no race with the real clock.
final class FakeClock: ServiceClock {
    private let millis: Mutex<Int64>
    init(at iso: String) { millis = Mutex(Instants.millis(iso)) }
    var nowMillis: Int64 { millis.withLock { $0 } }
    var now: Int64 { nowMillis }
    func set(_ millis: Int64) { self.millis.withLock { $0 = millis } }
    func set(_ iso: String) { set(Instants.millis(iso)) }
    func advance(seconds: Double) { millis.withLock { $0 += Int64(seconds * 1000) } }
}
