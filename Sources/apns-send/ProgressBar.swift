import Dispatch
import Synchronization

/// One line on a terminal's stderr, redrawn four times a second: sent, delivered,
/// failed, rate and, when the size of tokens.txt is known, an ETA from how much of
/// it was read. Only used when stderr is a terminal.
final class ProgressBar: Sendable {
    private let delivered = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let start = ContinuousClock.now
    private let sent: @Sendable () -> Int
    /// Fraction of the input read, 0...1, or nil when unknown.
    private let fraction: @Sendable () -> Double?
    // Resumed in init, cancelled in finish(); DispatchSource is itself thread-safe.
    nonisolated(unsafe) private let timer: DispatchSourceTimer

    init(sent: @escaping @Sendable () -> Int, fraction: @escaping @Sendable () -> Double?) {
        self.sent = sent
        self.fraction = fraction
        timer = DispatchSource.makeTimerSource(queue: .global())
        timer.schedule(deadline: .now(), repeating: .milliseconds(250))
        timer.setEventHandler { [weak self] in self?.draw() }
        timer.resume()
    }

    func count(delivered ok: Bool) {
        if ok {
            delivered.add(1, ordering: .relaxed)
        } else {
            failed.add(1, ordering: .relaxed)
        }
    }

    /// Stops redrawing and clears the line, so the summary starts clean.
    func finish() {
        timer.cancel()
        Stderr.write("\r\u{1B}[K")
    }

    private func draw() {
        let ok = delivered.load(ordering: .relaxed), bad = failed.load(ordering: .relaxed)
        let seconds = max(0.001, (ContinuousClock.now - start).seconds)
        let rate = Double(ok + bad) / seconds
        var line = "sent \(sent())  delivered \(ok)  failed \(bad)  \(Int(rate.rounded()))/s"
        if let done = fraction(), done > 0.001, done < 1 {
            line += "  ETA \(ProgressBar.clock(seconds * (1 - done) / done))"
        }
        Stderr.write("\r\(line)\u{1B}[K")
    }

    private static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        let (h, m) = (s / 3600, s / 60 % 60)
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return h > 0 ? "\(h):\(two(m)):\(two(s % 60))" : "\(m):\(two(s % 60))"
    }
}

extension Duration {
    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
