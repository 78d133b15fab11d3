import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A backend's webhook endpoint on 127.0.0.1, as real as a test needs: a socket
/// bound from the start (so its port is known and refuses connections: "down")
/// that starts listening on `up()`, answers each request with the next status of
/// `answers` (then 200), and records every request it read. A `trickling` one
/// answers 200 at once and then sends its body a byte every 100 ms, never ending,
/// until the client hangs up (one connection at a time, as a stuck receiver would).
final class WebhookReceiver: @unchecked Sendable {
    struct Request: Sendable {
        let headers: [String: String]
        let body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    let port: UInt16
    private let fd: Int32
    private let state: Mutex<(answers: [Int], requests: [Request], listening: Bool)>
    private var thread: Thread?
    private let trickling: Bool
    private let stopped = Mutex(false)

    init(answers: [Int] = [], trickling: Bool = false) {
        (fd, port) = boundLoopbackSocket()
        state = Mutex((answers, [], false))
        self.trickling = trickling
    }

    var url: String { "http://127.0.0.1:\(port)/hooks/apns" }
    var requests: [Request] { state.withLock { $0.requests } }
    /// Requests answered 2xx.
    var delivered: [Request] { state.withLock { s in s.requests } .filter { $0.headers["x-test-answer"] == nil } }

    /// Starts accepting (until `stop`).
    func up() {
        precondition(listen(fd, 64) == 0)
        state.withLock { $0.listening = true }
        let thread = Thread { [self] in self.serve() }
        self.thread = thread
        thread.start()
    }

    func stop() {
        stopped.withLock { $0 = true }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }

    private func serve() {
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            handle(client)
            close(client)
        }
    }

    private func handle(_ client: Int32) {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        var headerEnd: Int?
        var length = 0
        var headers: [String: String] = [:]
        while true {
            let n = read(client, &buffer, buffer.count)
            guard n > 0 else { return }
            data += buffer[0..<n]
            if headerEnd == nil, let end = Self.find(Array("\r\n\r\n".utf8), in: data) {
                headerEnd = end + 4
                let head = String(decoding: data[0..<end], as: UTF8.self).split(separator: "\r\n").dropFirst()
                for line in head {
                    guard let colon = line.firstIndex(of: ":") else { continue }
                    headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                }
                length = Int(headers["content-length"] ?? "0") ?? 0
            }
            if let headerEnd, data.count >= headerEnd + length {
                let body = Array(data[headerEnd..<(headerEnd + length)])
                let status = state.withLock { s -> Int in
                    let status = s.answers.isEmpty ? 200 : s.answers.removeFirst()
                    var recorded = headers
                    if status != 200 { recorded["x-test-answer"] = String(status) }
                    s.requests.append(Request(headers: recorded, body: body))
                    return status
                }
                if trickling {
                    trickle(client)
                    return
                }
                let reply = "HTTP/1.1 \(status) X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                _ = reply.withCString { write(client, $0, strlen($0)) }
                return
            }
        }
    }

    /// A 200 whose body never ends: a byte every 100 ms until the client closes.
    private func trickle(_ client: Int32) {
        // Small enough for a client that reads a little of the answer to wait for all of it.
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 30000\r\n\r\n"
        guard head.withCString({ send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }) > 0 else { return }
        var byte: UInt8 = UInt8(ascii: "x")
        while !stopped.withLock({ $0 }) {
            usleep(100_000)
            guard send(client, &byte, 1, Int32(MSG_NOSIGNAL)) == 1 else { return }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i..<(i + needle.count)].elementsEqual(needle) {
            return i
        }
        return nil
    }

    deinit {
        if thread == nil { close(fd) }
    }
}
