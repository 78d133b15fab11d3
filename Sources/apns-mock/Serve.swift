import APNsMock
import Dispatch
import FoundationEssentials
import Glibc

/// Serves until SIGINT or SIGTERM; SIGUSR1 dumps statistics without stopping.
/// Signals arrive as Dispatch sources, so no handler runs in signal context.
/// `announce` is written only once they are in place: a caller that signals as soon
/// as it reads the line must not find SIGUSR1 still at its default (which ends the
/// process) or ignored before its source listens.
func serve(_ server: MockServer, statsPath: String?, announce: String) -> Never {
    func dump() {
        let json = server.statisticsJSON() + "\n"
        if let statsPath {
            _ = FileManager.default.createFile(atPath: statsPath, contents: Data(json.utf8))
        } else {
            writeAll(json, to: STDERR_FILENO)
        }
    }
    let queue = DispatchQueue(label: "apns-mock.signals")
    var sources: [DispatchSourceSignal] = []
    for sig in [SIGINT, SIGTERM, SIGUSR1] {
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
        source.setEventHandler {
            dump()
            if sig != SIGUSR1 {
                server.stop()
                exit(0)
            }
        }
        source.resume()
        sources.append(source)
    }
    writeAll(announce, to: STDOUT_FILENO)
    withExtendedLifetime(sources) { dispatchMain() }
}
