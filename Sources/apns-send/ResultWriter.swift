import APNs
import Dispatch
import Glibc
import Synchronization

/// Writes records as results arrive, through a buffer that is flushed when it
/// fills, at least once a second (a timer), and at the end.
final class ResultWriter: Sendable {
    private struct State {
        var buffer: [UInt8] = []
        /// The first write error; later records are dropped, the summary says so.
        var failure: String?
    }

    private static let flushAt = 64 * 1024

    let format: OutputFormat
    /// Where records go, for messages ("stdout" or the path).
    let name: String
    /// Its writes never wait on a reader: a regular file or /dev/null, not a pipe, a
    /// socket or a terminal.
    let neverWaits: Bool
    private let fd: Int32
    private let ownsFD: Bool
    private let state = Mutex(State())
    // Resumed in init, cancelled in finish(); DispatchSource is itself thread-safe.
    nonisolated(unsafe) private let timer: DispatchSourceTimer

    /// Records to `path`, created or truncated (appended to with `append`), or to
    /// stdout when nil.
    init(path: String?, format: OutputFormat, layout: RecordLayout = .tokens, append: Bool = false) throws(LineReaderError) {
        var needsHeader = format == .csv
        if let path {
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0o644)
            guard fd >= 0 else { throw LineReaderError(reason: String(cString: strerror(errno))) }
            var st = stat()
            if append && fstat(fd, &st) == 0 && st.st_size > 0 { needsHeader = false }
            self.fd = fd
            ownsFD = true
            name = path
        } else {
            fd = STDOUT_FILENO
            ownsFD = false
            name = "stdout"
        }
        self.format = format
        neverWaits = ResultWriter.neverWaits(fd)
        timer = DispatchSource.makeTimerSource(queue: .global())
        if needsHeader { state.withLock { $0.buffer = layout.csvHeader } }
        timer.schedule(deadline: .now() + 1, repeating: 1)
        timer.setEventHandler { [weak self] in self?.flush() }
        timer.resume()
    }

    private static func neverWaits(_ fd: Int32) -> Bool {
        var st = stat(), null = stat()
        guard fstat(fd, &st) == 0 else { return false }
        if st.st_mode & S_IFMT == S_IFREG { return true }
        return st.st_mode & S_IFMT == S_IFCHR && stat("/dev/null", &null) == 0 && st.st_rdev == null.st_rdev
    }

    /// `context`: a message's line and id (`--messages` runs), nil for a token's record.
    func write(_ result: DeliveryResult, context: LineContext? = nil) {
        state.withLock { s in
            if format == .csv {
                Record.csv(result, context: context, to: &s.buffer)
            } else {
                Record.json(result, context: context, to: &s.buffer)
            }
            if s.buffer.count >= ResultWriter.flushAt { drain(&s) }
        }
    }

    func flush() {
        state.withLock { drain(&$0) }
    }

    /// Stops the timer and writes what is left; returns the write error, if any.
    func finish() -> String? {
        timer.cancel()
        return state.withLock { s in
            drain(&s)
            if ownsFD && close(fd) != 0 && s.failure == nil { s.failure = String(cString: strerror(errno)) }
            return s.failure
        }
    }

    /// Under the lock, so records never interleave.
    private func drain(_ s: inout State) {
        defer { s.buffer.removeAll(keepingCapacity: true) }
        guard s.failure == nil else { return }
        var offset = 0
        while offset < s.buffer.count {
            let n = s.buffer.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                s.failure = String(cString: strerror(errno))
                return
            }
            offset += n
        }
    }
}
