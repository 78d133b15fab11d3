import Foundation
import Testing
import TestSupport

/// The apns-mock executable: its help, serving, statistics on SIGUSR1 and on exit.
@Suite struct MockCommandTests {
    let binary = Package.executable("apns-mock")

    @Test("--help documents every option")
    func help() {
        let r = runSync(binary, ["--help"])
        #expect(r.status == 0)
        for option in ["--host", "--port", "--allow-non-loopback", "--cert", "--key", "--auth-key", "--team-id",
                       "--topic", "--max-streams", "--initial-streams", "--unregistered", "--latency", "--fail", "--goaway-after",
                       "--reset-after", "--settings-drop-after", "--idle-timeout", "--idle-500-after",
                       "--token-update-interval", "--stall", "--stall-after", "--no-ping-ack", "--key-team", "--key-environment", "--key-topics", "--sandbox", "--stats", "--threads", "--seed"] {
            #expect(r.stdout.contains(option), "help lacks \(option)")
        }
    }

    @Test("Serves, writes statistics on SIGUSR1 and on SIGTERM")
    func serves() async throws {
        let pki = Fixture.pki
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mockcli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let unregistered = dir.appendingPathComponent("tokens.txt")
        try "# gone\n\(Fixture.otherToken),1700000000000\n".write(to: unregistered, atomically: true, encoding: .utf8)
        let stats = dir.appendingPathComponent("stats.json").path

        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--port", "0", "--cert", pki.serverCertificate, "--key", pki.serverKey,
                             "--auth-key", pki.keyPath, "--team-id", pki.teamID, "--topic", pki.topic,
                             "--unregistered", unregistered.path, "--stats", stats, "--sandbox"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let line = String(decoding: out.fileHandleForReading.availableData, as: UTF8.self)
        let port = try #require(UInt16(line.split(separator: ":").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))

        var gone = Request()
        gone.path = "/3/device/\(Fixture.otherToken)"
        let answers = await offPool { [gone] in curl(port, [Request(), gone]).answers }
        #expect(answers.map(\.status) == [200, 410])
        #expect(answers.first?.headers["apns-unique-id"] != nil)

        kill(process.processIdentifier, SIGUSR1)
        for _ in 0..<3_000 where !FileManager.default.fileExists(atPath: stats) {   // a minute: a hang guard
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try String(contentsOfFile: stats, encoding: .utf8).contains(#""410":1"#))
        process.terminate()
        await offPool { process.waitUntilExit() }
        #expect(process.terminationStatus == 0)
        #expect(try String(contentsOfFile: stats, encoding: .utf8).contains(#""Unregistered":1"#))
    }

    @Test("A fault count below 1 is refused, naming the option", arguments: ["--goaway-after", "--reset-after", "--stall-after"])
    func faultCountsStartAtOne(_ option: String) {
        let pki = Fixture.pki
        let r = runSync(binary, [option, "0", "--port", "0", "--cert", pki.serverCertificate, "--key", pki.serverKey])
        #expect(r.status == 64)
        #expect(r.stderr.contains("\(option) wants a count of at least 1, got 0"))
    }

    @Test("Refuses a non-loopback address with one clear line and exit 2")
    func nonLoopback() {
        let pki = Fixture.pki
        let r = runSync(binary, ["--host", "0.0.0.0", "--port", "0", "--cert", pki.serverCertificate,
                                 "--key", pki.serverKey])
        #expect(r.status == 2)
        #expect(r.stderr.contains("not a loopback address"))
    }
}
