import APNsMock
import Foundation
import Testing
import TestSupport

/// Inputs made to break a parser: each gets one clear error line (exit 2) or
/// correct records, never a crash or a hang.
@Suite struct HostileInputCLITests {
    /// Exit 2, one stderr line containing `says`, no records, nothing sent.
    static func expectRefused(_ r: ProcessResult, _ mock: MockServer, says: [String],
                              sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 2, "\(r.stderr)", sourceLocation: sourceLocation)
        let lines = CLI.lines(r.stderr)
        #expect(lines.count == 1, "\(r.stderr)", sourceLocation: sourceLocation)
        for s in says { #expect(lines.first?.contains(s) == true, "\(r.stderr)", sourceLocation: sourceLocation) }
        #expect(r.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(mock.statistics().streams == 0, sourceLocation: sourceLocation)
    }

    @Test func payloadWithNULByteIsRefused() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let payload = scratch.file("nul.json", Data(#"{"aps":{"alert":"a"#.utf8) + [0] + Data(#"b"}}"#.utf8))
        let r = await CLI.run(CLI.arguments(mock) + [payload, scratch.file("t.txt", CLI.tokens(1)[0])])
        Self.expectRefused(r, mock, says: ["nul.json", "not valid JSON"])
    }

    @Test func payloadWithInvalidUTF8IsRefused() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        // An overlong encoding of '/' and a lone continuation byte.
        let payload = scratch.file("utf8.json", Data(#"{"aps":{"alert":""#.utf8) + [0xC0, 0xAF, 0x80] + Data(#""}}"#.utf8))
        let r = await CLI.run(CLI.arguments(mock) + [payload, scratch.file("t.txt", CLI.tokens(1)[0])])
        Self.expectRefused(r, mock, says: ["utf8.json"])
    }

    /// 100 000 levels: over the size limit and far over the depth limit; neither
    /// may cost the stack. A nesting that fits in 4096 bytes is refused for depth.
    @Test(arguments: [100_000, 2_000])
    func deeplyNestedPayloadIsRefused(levels: Int) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let text = #"{"a":"# + String(repeating: "[", count: levels) + String(repeating: "]", count: levels) + "}"
        let payload = scratch.file("deep.json", text)
        let r = await CLI.run(CLI.arguments(mock) + [payload, scratch.file("t.txt", CLI.tokens(1)[0])])
        Self.expectRefused(r, mock, says: ["deep.json"])
    }

    /// A 10 MB line among good tokens, CRLF line ends throughout: the long line is
    /// one malformed record, every good token is delivered.
    @Test func tenMegabyteLineAndCRLF() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(4)
        let huge = String(repeating: "a", count: 10 * 1024 * 1024)
        let file = scratch.file("t.txt", [tokens[0], tokens[1], huge, tokens[2], tokens[3]].joined(separator: "\r\n") + "\r\n")
        let r = await CLI.run(CLI.arguments(mock) + [CLI.payload, file])
        #expect(r.status == 1, "a malformed line means not all delivered: \(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == 5)
        #expect(Set(records.filter { $0.status == 200 }.map(\.token)) == Set(tokens))
        let bad = records.filter { $0.status == 0 }
        #expect(bad.count == 1)
        #expect(bad.first?.reason == "BadDeviceToken")
        #expect((bad.first?.token.utf8.count ?? .max) <= 64 * 1024, "the record does not carry 10 MB")
        #expect(mock.statistics().requests == 4)
    }

    @Test func tokensFileThatIsADirectoryIsRefused() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let r = await CLI.run(CLI.arguments(mock) + [CLI.payload, scratch.directory.path])
        Self.expectRefused(r, mock, says: ["is a directory"])
    }

    /// A FIFO: apns-send waits for a writer, then reads what it wrote until it
    /// closes, and finishes; it must not hang once the writer is gone.
    @Test func tokensFromAFIFO() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let fifo = scratch.path("tokens.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let tokens = CLI.tokens(3)
        // The writer's open blocks until apns-send opens the FIFO for reading, and
        // apns-send's until the writer's: whichever comes first waits for the other,
        // however late either gets to run. No deadline on the writer's side: one that
        // gave up before a starved task pool had even started apns-send would leave
        // apns-send waiting for a writer forever. Its thread starts here, not in a task
        // the pool may delay.
        let writer = FIFOWriter(path: fifo, text: tokens.joined(separator: "\n") + "\nnot-a-token\n")
        let r = await run(CLI.binary, CLI.arguments(mock) + [CLI.payload, fifo],
                          environment: CLI.cleanEnvironment(), timeout: 180)
        await writer.finish()
        #expect(r.status == 1, "one malformed line: \(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == 4)
        #expect(Set(records.filter { $0.status == 200 }.map(\.token)) == Set(tokens))
        #expect(records.filter { $0.status == 0 }.map(\.token) == ["not-a-token"])
    }
}

/// Writes `text` into a FIFO from a thread of its own: a blocking open (it waits for a
/// reader), one write, close.
private final class FIFOWriter: Sendable {
    private let path: String
    private let done = DispatchSemaphore(value: 0)

    init(path: String, text: String) {
        self.path = path
        Thread { [done] in
            // Should the reader be gone mid-write, the write fails with EPIPE instead of
            // SIGPIPE ending the test process.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            let fd = open(path, O_WRONLY | O_CLOEXEC)
            if fd >= 0 {
                _ = text.withCString { write(fd, $0, strlen($0)) }
                close(fd)
            }
            done.signal()
        }.start()
    }

    /// Waits for the writer. Once the program that should have read the FIFO has ended:
    /// if it never opened it, a reader of our own lets the writer's open return.
    func finish() async {
        let reader = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        await offPool { [done] in done.wait() }
        if reader >= 0 { close(reader) }
    }
}
