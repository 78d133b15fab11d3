import Dispatch
import Glibc

/// SIGINT and SIGTERM as dispatch events instead of the default "die at once",
/// so a run can finish its requests in flight and write every record.
struct Signals {
    private let sources: [DispatchSourceSignal]

    static func onInterrupt(_ handler: @escaping @Sendable () -> Void) -> Signals {
        Signals(sources: [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)   // the dispatch source sees it; the default action must not
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        })
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}
