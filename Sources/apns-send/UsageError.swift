import Glibc

/// A usage, input or configuration problem found before anything was sent:
/// printed as one line on stderr, exit status 2.
struct UsageError: Error {
    let message: String

    init(_ message: String) {
        self.message = UsageError.visible(message)
    }

    /// For a file: "PATH: why".
    init(_ path: String, _ why: String) {
        message = UsageError.visible("\(path): \(why)")
    }

    /// One line, whatever the user typed: control characters in echoed values
    /// (a file name or flag value with a line break or an escape sequence) are
    /// shown escaped, so they can neither split the line nor drive the terminal.
    private static func visible(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            out += scalar.value < 0x20 || scalar.value == 0x7F ? scalar.escaped(asASCII: true) : String(scalar)
        }
        return out
    }
}

/// Lines for the user on stderr, unbuffered, each prefixed with the program name.
enum Stderr {
    static func line(_ text: String) {
        write("apns-send: \(text)\n")
    }

    static func write(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(STDERR_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    static var isTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}

/// The whole of a small file (a payload, a config file); the error is the reason alone.
func readSmallFile(_ path: String) throws(LineReaderError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw LineReaderError(reason: String(cString: strerror(errno))) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { throw LineReaderError(reason: errno == EISDIR ? "is a directory" : String(cString: strerror(errno))) }
        if n == 0 { return bytes }
        bytes.append(contentsOf: chunk[..<n])
    }
}
