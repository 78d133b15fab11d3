import Glibc
import Synchronization

/// Reads a file line by line through one 64 KiB buffer, so a file of millions of
/// lines never sits in memory: at most the buffer plus one line.
final class LineReader {
    /// Lines longer than this are cut (they cannot be tokens anyway), so a file
    /// without newlines cannot grow one line without bound.
    static let maxLine = 64 * 1024
    private static let bufferSize = 64 * 1024

    private let fd: Int32
    /// Behind a pointer, not a stored array: every line is read out of it, and each
    /// access to a class's stored property is checked for exclusivity at run time.
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    private var start = 0
    private var end = 0
    private var atEOF = false
    /// The file's size when it is a regular file: what makes an ETA cheap.
    let size: Int?
    /// Bytes handed out as lines so far; read by the progress bar on another thread.
    let consumed = Atomic<Int>(0)
    /// Why reading stopped early, if it did.
    private(set) var failure: String?
    /// True when the last line handed out was cut at `maxLine` bytes.
    private(set) var lastLineCut = false

    /// Opens `path` for reading; the error text is the reason alone ("No such file or directory").
    init(path: String) throws(LineReaderError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw LineReaderError(reason: String(cString: strerror(errno))) }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw LineReaderError(reason: reason)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw LineReaderError(reason: "is a directory")
        }
        self.fd = fd
        size = (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil
        buffer = .allocate(capacity: LineReader.bufferSize)
        buffer.initialize(repeating: 0)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// The next line without its "\n" (a "\r" before it stays: callers trim it);
    /// nil at the end of the file or after a read error (`failure`).
    func nextLine() -> [UInt8]? {
        withNextLine { Array($0) }
    }

    /// `nextLine()` without a copy: `body` sees the line where it lies in the buffer
    /// (valid only during the call), and its value is returned; nil at the end.
    func withNextLine<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        var long: [UInt8] = []
        lastLineCut = false
        while true {
            let newline = findNewline()
            if newline != nil || atEOF {
                let stop = newline ?? end
                guard newline != nil || start < end || !long.isEmpty else { return nil }
                defer { start = newline.map { $0 + 1 } ?? end }
                let ending = newline == nil ? 0 : 1
                if long.isEmpty {
                    let cut = min(stop, start + LineReader.maxLine)
                    lastLineCut = cut < stop
                    consumed.add(cut - start + ending, ordering: .relaxed)
                    return body(UnsafeBufferPointer(start: buffer.baseAddress! + start, count: cut - start))
                }
                let line = take(upTo: stop, after: long)
                consumed.add(line.count + ending, ordering: .relaxed)
                return line.withUnsafeBufferPointer(body)
            }
            if start == 0 && end == buffer.count {
                // A line longer than the buffer: keep its head, drop the rest.
                long = take(upTo: end, after: long)
                start = end
            }
            refill()
        }
    }

    /// memchr: the scan every byte of the file goes through.
    private func findNewline() -> Int? {
        guard start < end else { return nil }
        let base = UnsafeRawPointer(buffer.baseAddress!)
        return memchr(base + start, 0x0A, end - start).map { UnsafeRawPointer($0) - base }
    }

    private func take(upTo index: Int, after head: [UInt8]) -> [UInt8] {
        let room = max(0, LineReader.maxLine - head.count)
        if index - start > room { lastLineCut = true }
        return head + buffer[start..<min(index, start + room)]
    }

    /// Moves the unread tail to the front and reads more after it.
    private func refill() {
        if start > 0 {
            _ = memmove(buffer.baseAddress!, buffer.baseAddress! + start, end - start)
            end -= start
            start = 0
        }
        while true {
            let n = read(fd, buffer.baseAddress! + end, buffer.count - end)
            if n > 0 {
                end += n
                return
            }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { failure = String(cString: strerror(errno)) }
            atEOF = true
            return
        }
    }
}

struct LineReaderError: Error {
    let reason: String
}
