import Foundation

/// One TCP connection to a test server, driven byte by byte: what a slow or hostile
/// client does (a head that never ends, a body trickled a byte at a time) and what
/// it sees (an answer, the end of the stream, a reset). Blocking calls on the
/// caller's thread; every wait has a hang guard.
final class RawSocket: @unchecked Sendable {
    let fd: Int32
    /// What has been read so far.
    private(set) var received: [UInt8] = []
    /// Read returned 0 (the server ended the stream) or failed (a reset).
    private(set) var closed = false

    /// Nil when the connection could not be made.
    init?(port: UInt16) {
        guard let fd = connectLoopback(port: port) else { return nil }
        self.fd = fd
    }

    deinit { Foundation.close(fd) }

    /// Sends `bytes`; false when the connection is gone (reset, or closed by the server).
    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                closed = true
                return false
            }
            sent += n
        }
        return true
    }

    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    /// Reads what is there within `timeout`: true when something came or the stream
    /// ended (see `closed`), false when nothing happened in that time.
    @discardableResult
    func poll(timeout: Duration) -> Bool {
        guard !closed else { return true }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let millis = Int32(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard Glibc.poll(&p, 1, millis) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = read(fd, &buffer, buffer.count)
        if n <= 0 {
            closed = true
        } else {
            received += buffer[0..<n]
        }
        return true
    }

    /// Forgets what was read (before the next answer on a keep-alive connection).
    func clearReceived() { received.removeAll() }

    /// Waits until the stream ends (or resets), up to `guardTime`; whether it did.
    func awaitClose(guardTime: Duration) -> Bool {
        let end = ContinuousClock.now + guardTime
        while !closed && ContinuousClock.now < end { poll(timeout: .milliseconds(100)) }
        return closed
    }

    /// Waits until a whole answer (head and `Content-Length` body) has come, up to `guardTime`.
    func awaitResponse(guardTime: Duration) -> HTTPResponse? {
        let end = ContinuousClock.now + guardTime
        while ContinuousClock.now < end {
            if let response = complete() { return response }
            if closed { return complete() }
            poll(timeout: .milliseconds(100))
        }
        return complete()
    }

    private func complete() -> HTTPResponse? {
        let text = String(decoding: received, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let response = HTTP.parse(received)
        let length = response.headers.first { $0.0 == "content-length" }.flatMap { Int($0.1) } ?? 0
        guard text[split.upperBound...].utf8.count >= length else { return nil }
        return response
    }

    /// Runs `body` on a thread of its own (blocking socket work off the test's executor).
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }
}
