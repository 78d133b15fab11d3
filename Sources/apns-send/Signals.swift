import Glibc
import Synchronization

/// SIGINT and SIGTERM as events instead of the default "die at once", so a run
/// can finish its requests in flight and write every record.
///
/// A plain sigaction handler writes one byte to a pipe (the only async-signal-safe
/// thing it needs); a thread of its own reads the pipe and calls the handler.
/// Dispatch signal sources were tried first: under load they lost signals.
final class Signals: Sendable {
    private let active: Atomic<Bool>

    static func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> Signals {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return Signals(active: false) }
        signalPipeWriter = fds[1]
        let signals = Signals(active: true)
        let reader = fds[0]
        // The reader first: a handler with nobody reading its pipe would swallow Ctrl-C.
        let started = startThread { [signals] in
            // A parent may have started us with these blocked (Dispatch worker threads
            // block them, and exec keeps the mask); a blocked signal would wait forever.
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGINT)
            sigaddset(&set, SIGTERM)
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
            var byte: UInt8 = 0
            while read(reader, &byte, 1) == 1 {
                if signals.isActive { handler() }
            }
        }
        guard started else { return Signals(active: false) }
        for number in [SIGINT, SIGTERM] {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in
                var byte: UInt8 = 1
                _ = write(signalPipeWriter, &byte, 1)
            }
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            sigaction(number, &action, nil)
        }
        return signals
    }

    private init(active: Bool) {
        self.active = Atomic(active)
    }

    private var isActive: Bool { active.load(ordering: .acquiring) }

    /// Later signals are still caught, and ignored: the run is ending anyway.
    func cancel() {
        active.store(false, ordering: .releasing)
    }
}

/// Written once before the handlers are installed; read by them.
nonisolated(unsafe) private var signalPipeWriter: Int32 = -1

/// Runs `body` on a detached thread of its own (the signal reader blocks in read()
/// for the whole run, which no pool thread should); false when none could be made.
private func startThread(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Body { let run: @Sendable () -> Void; init(_ run: @escaping @Sendable () -> Void) { self.run = run } }
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(&thread, nil, { context in
        Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
        return nil
    }, context)
    guard started == 0 else {
        Unmanaged<Body>.fromOpaque(context).release()
        return false
    }
    pthread_detach(thread)
    return true
}
