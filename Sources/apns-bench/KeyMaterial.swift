import Foundation

/// The throw-away PKI of scripts/gen-pki.sh: the mock's TLS certificate, the CA
/// that signed it, and a provider key with its ids.
struct KeyMaterial: Sendable {
    let directory: String
    let keyID: String
    let teamID: String
    let topic: String

    var caFile: String { directory + "/ca.pem" }
    var serverCertificate: String { directory + "/server.crt" }
    var serverKey: String { directory + "/server.key" }
    var providerKey: String { directory + "/AuthKey_\(keyID).p8" }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Reads DIR, or generates a fresh set into a temporary folder when nil.
    static func load(from directory: String?) async throws -> KeyMaterial {
        let dir: String
        if let directory { dir = directory } else { dir = try await generate() }
        guard let ids = try? String(contentsOfFile: dir + "/ids.env", encoding: .utf8) else {
            throw Failure(description: "\(dir)/ids.env: not found (make it with scripts/gen-pki.sh DIR)")
        }
        var values: [String: String] = [:]
        for line in ids.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        guard let keyID = values["KEY_ID"], let teamID = values["TEAM_ID"], let topic = values["TOPIC"] else {
            throw Failure(description: "\(dir)/ids.env lacks KEY_ID, TEAM_ID or TOPIC")
        }
        return KeyMaterial(directory: dir, keyID: keyID, teamID: teamID, topic: topic)
    }

    /// Runs scripts/gen-pki.sh on a thread of its own: a subprocess must not block the
    /// cooperative pool, and on Linux Dispatch's global queues share its threads.
    private static func generate() async throws -> String {
        guard let script = findScript() else {
            throw Failure(description: "scripts/gen-pki.sh not found from here; give --pki DIR")
        }
        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-bench-pki-\(ProcessInfo.processInfo.processIdentifier)").path
        let status: Int32 = await withCheckedContinuation { done in
            Thread {
                let p = Process()
                p.executableURL = URL(fileURLWithPath: "/bin/bash")
                p.arguments = [script, dir]
                do {
                    try p.run()
                    p.waitUntilExit()
                    done.resume(returning: p.terminationStatus)
                } catch {
                    done.resume(returning: -1)
                }
            }.start()
        }
        guard status == 0 else { throw Failure(description: "\(script) failed (status \(status))") }
        return dir
    }

    /// The script in the working directory's tree, else in the tree this binary was built in.
    private static func findScript() -> String? {
        let exe = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for start in [URL(fileURLWithPath: FileManager.default.currentDirectoryPath), exe.deletingLastPathComponent()] {
            var dir = start
            while dir.path != "/" {
                let candidate = dir.appendingPathComponent("scripts/gen-pki.sh").path
                if FileManager.default.fileExists(atPath: candidate) { return candidate }
                dir.deleteLastPathComponent()
            }
        }
        return nil
    }
}
