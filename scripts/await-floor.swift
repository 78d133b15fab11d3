// What one single send costs the Swift runtime alone, with no network and no engine:
// CALLERS tasks each loop { hand a continuation to a queue; await it }, and one plain
// thread (as the engine's sender thread) takes the queue in batches and resumes every
// continuation. Every `APNsClient.send(_:to:)` pays this once (issue 9: it is part of
// the gap between the singles rows and the batch row of `make bench`).
//
//   swiftc -O scripts/await-floor.swift -o /tmp/await-floor
//   /tmp/await-floor CALLERS AWAITS [--cancellable]
//
// --cancellable wraps each await in withTaskCancellationHandler, as a send does.
import Foundation
import Synchronization

/// The continuations waiting to be resumed, and the thread that resumes them.
final class Resumer: @unchecked Sendable {   // `waiting` is guarded by `lock`
    private var waiting: [UnsafeContinuation<Void, Never>] = []
    private var lock = pthread_mutex_t()
    private var ready = pthread_cond_t()

    init() {
        pthread_mutex_init(&lock, nil)
        pthread_cond_init(&ready, nil)
        let thread = Thread { [self] in run() }
        thread.start()
    }

    func enqueue(_ c: UnsafeContinuation<Void, Never>) {
        pthread_mutex_lock(&lock)
        waiting.append(c)
        let wasEmpty = waiting.count == 1
        pthread_mutex_unlock(&lock)
        if wasEmpty { pthread_cond_signal(&ready) }
    }

    private func run() {
        var batch: [UnsafeContinuation<Void, Never>] = []
        while true {
            pthread_mutex_lock(&lock)
            while waiting.isEmpty { pthread_cond_wait(&ready, &lock) }
            swap(&waiting, &batch)
            pthread_mutex_unlock(&lock)
            for c in batch { c.resume() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

func cpuSeconds() -> Double {
    var r = rusage()
    getrusage(RUSAGE_SELF.rawValue, &r)
    return Double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + Double(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6
}

let arguments = CommandLine.arguments
guard arguments.count >= 3, let callers = Int(arguments[1]), let awaits = Int(arguments[2]), callers > 0, awaits > 0
else {
    FileHandle.standardError.write("usage: await-floor CALLERS AWAITS [--cancellable]\n".data(using: .utf8)!)
    exit(2)
}
let cancellable = arguments.dropFirst(3).contains("--cancellable")
let resumer = Resumer()
let taken = Atomic<Int>(0)

let start = ContinuousClock.now, cpuStart = cpuSeconds()
let tasks = (0..<callers).map { _ in
    Task {
        while taken.add(1, ordering: .relaxed).newValue <= awaits {
            if cancellable {
                await withTaskCancellationHandler {
                    await withUnsafeContinuation { resumer.enqueue($0) }
                } onCancel: {}
            } else {
                await withUnsafeContinuation { resumer.enqueue($0) }
            }
        }
    }
}
for task in tasks { await task.value }
let (s, atto) = (ContinuousClock.now - start).components
let wall = Double(s) + Double(atto) / 1e18, cpu = cpuSeconds() - cpuStart
print(String(format: "%d callers%@: %.0f awaits/s, %.2f us CPU per await",
             callers, cancellable ? " (cancellable)" : "", Double(awaits) / wall, cpu / Double(awaits) * 1e6))
