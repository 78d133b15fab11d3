import Glibc

/// Whole writes to a file descriptor, unbuffered: whoever started the mock waits for
/// its "listening" line, and its statistics must be out before it exits.
func writeAll(_ text: String, to fd: Int32) {
    var bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        offset += n
    }
}
