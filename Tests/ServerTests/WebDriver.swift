import Foundation
import TestSupport

/// A W3C WebDriver client (the protocol Selenium speaks) for Debian's chromedriver,
/// driving headless Chromium: the few commands a console test needs, over the
/// harness's plain HTTP/1.1 client. chromedriver is started on 127.0.0.1 for the
/// test and stopped with it.
final class WebDriver: @unchecked Sendable {
    static let chromedriver = "/usr/bin/chromedriver"
    static let chromium = "/usr/bin/chromium"
    /// W3C's key for an element reference in JSON.
    static let elementKey = "element-6066-11e4-a52e-4f735466cecf"

    private let process: ChildProcess
    private let port: UInt16
    private let session: String
    /// chromedriver's log and Chromium's profile, removed with the driver.
    private let scratch: Scratch

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private init(process: ChildProcess, port: UInt16, session: String, scratch: Scratch) {
        self.process = process
        self.port = port
        self.session = session
        self.scratch = scratch
    }

    /// chromedriver on a port the kernel picks, and one headless Chromium session.
    /// Missing programs fail the test with what to install: it never skips.
    static func start(width: Int, height: Int) async throws -> WebDriver {
        for program in [chromedriver, chromium] where !FileManager.default.isExecutableFile(atPath: program) {
            throw Failure(description: "\(program) is missing: the console's browser test needs Debian's chromium "
                          + "and chromium-driver packages (`make deps` as root installs them)")
        }
        let scratch = Scratch()
        let log = scratch.path("chromedriver.log")
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let p = ChildProcess()
        p.executableURL = URL(fileURLWithPath: chromedriver)
        p.arguments = ["--port=0", "--allowed-ips=127.0.0.1"]
        p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        p.standardError = FileHandle.nullDevice
        try p.run()
        // Generous: only a hang guard for a loaded machine.
        let end = Date().addingTimeInterval(60)
        var port: UInt16?
        while port == nil {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.contains("started successfully on port ") }) {
                port = UInt16(line.split(separator: " ").last?.trimmingCharacters(in: .punctuationCharacters) ?? "")
            }
            guard port != nil || (p.isRunning && Date() < end) else {
                if p.isRunning { p.terminate() }
                p.waitUntilExit()
                throw Failure(description: "chromedriver did not start: \(text)")
            }
            if port == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        let capabilities: [String: Any] = ["capabilities": ["alwaysMatch": [
            "browserName": "chrome",
            "goog:chromeOptions": [
                "binary": chromium,
                // No sandbox: the tests may run as root (CI containers), where Chromium's refuses to start.
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--no-first-run", "--disable-extensions", "--window-size=\(width),\(height)",
                         "--user-data-dir=\(scratch.path("profile"))"],
            ],
        ]]]
        let answer = try await call(port: port!, "POST", "/session", capabilities)
        guard let session = (answer as? [String: Any])?["sessionId"] as? String else {
            p.terminate()
            p.waitUntilExit()
            throw Failure(description: "chromedriver made no session: \(answer.map { String(describing: $0) } ?? "no answer")")
        }
        return WebDriver(process: p, port: port!, session: session, scratch: scratch)
    }

    /// Ends the session (Chromium exits) and chromedriver.
    func quit() async {
        _ = try? await Self.call(port: port, "DELETE", "/session/\(session)", nil)
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }

    // MARK: Commands

    func open(_ url: String) async throws { _ = try await command("POST", "url", ["url": url]) }

    func resize(width: Int, height: Int) async throws {
        _ = try await command("POST", "window/rect", ["width": width, "height": height])
    }

    /// The first element `css` selects; an error when there is none.
    func element(_ css: String) async throws -> String {
        let found = try await command("POST", "element", ["using": "css selector", "value": css])
        guard let id = (found as? [String: Any])?[Self.elementKey] as? String else {
            throw Failure(description: "no element \(css): \(String(describing: found))")
        }
        return id
    }

    func type(_ css: String, _ text: String) async throws {
        let id = try await element(css)
        _ = try await command("POST", "element/\(id)/clear", [:])
        _ = try await command("POST", "element/\(id)/value", ["text": text])
    }

    func click(_ css: String) async throws {
        let id = try await element(css)
        _ = try await command("POST", "element/\(id)/click", [:])
    }

    /// Runs `script` (a function body) in the page; its return value.
    @discardableResult
    func run(_ script: String, _ args: [Any] = []) async throws -> Any? {
        try await command("POST", "execute/sync", ["script": script, "args": args])
    }

    /// The text `css`'s first element shows (empty when there is none).
    func text(_ css: String) async throws -> String {
        try await run("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''", [css]) as? String ?? ""
    }

    /// Waits until `script` returns true (a hang guard, not a time the test checks);
    /// fails saying `what`.
    func waitFor(_ what: String, _ script: String, timeout: TimeInterval = 60) async throws {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if try await run(script) as? Bool == true { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        let text = try await run("return document.body.innerText") as? String ?? ""
        throw Failure(description: "waited \(Int(timeout)) s for \(what); the page says:\n\(text)")
    }

    /// The page as it is drawn now, saved as a PNG at `path`.
    func screenshot(to path: String) async throws {
        guard let base64 = try await command("GET", "screenshot", nil) as? String,
              let png = Data(base64Encoded: base64) else { throw Failure(description: "no screenshot") }
        try png.write(to: URL(fileURLWithPath: path))
    }

    private func command(_ method: String, _ path: String, _ body: [String: Any]?) async throws -> Any? {
        try await Self.call(port: port, method, "/session/\(session)/\(path)", body)
    }

    private static func call(port: UInt16, _ method: String, _ path: String, _ body: [String: Any]?) async throws -> Any? {
        let bytes = try body.map { Array(try JSONSerialization.data(withJSONObject: $0)) } ?? []
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        head += "Content-Type: application/json\r\nContent-Length: \(bytes.count)\r\n\r\n"
        let request = Array(head.utf8) + bytes
        let raw = await offPool { exchange(port: port, request) }
        let response = HTTP.parse(raw)
        let json = (try? JSONSerialization.jsonObject(with: Data(response.body.utf8))) as? [String: Any]
        guard response.status == 200, let json else {
            throw Failure(description: "WebDriver \(method) \(path): \(response.status) \(response.body.prefix(500))")
        }
        return json["value"] is NSNull ? nil : json["value"]
    }

    /// One request and its answer, read to its Content-Length: chromedriver keeps
    /// the connection open whatever `Connection: close` says.
    private static func exchange(port: UInt16, _ bytes: [UInt8]) -> [UInt8] {
        guard let fd = connectLoopback(port: port) else { return [] }
        defer { close(fd) }
        var tv = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return [] }
            sent += n
        }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        let separator = Array("\r\n\r\n".utf8)
        while true {
            if let end = out.firstRange(of: separator) {
                let head = String(decoding: out[..<end.lowerBound], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                if let length, out.count >= end.upperBound + length { return Array(out[..<(end.upperBound + length)]) }
            }
            let n = read(fd, &buf, buf.count)
            if n <= 0 { return out }
            out.append(contentsOf: buf[0..<n])
        }
    }
}
