import Foundation
import TestSupport
import Testing

/// `--version` on every shipped binary: one line, the same on all three, naming the
/// release and the commit it was built from (`unknown` only where the tree was not a
/// git checkout; `make dist-check` checks a release's against its checkout's HEAD).
@Suite struct VersionTests {
    @Test func everyBinaryPrintsTheReleaseAndTheCommit() async throws {
        var lines: [String] = []
        for name in ["apns-server", "apns-send", "apns-mock"] {
            let r = await TestSupport.run(Package.executable(name), ["--version"], timeout: 60)
            #expect(r.status == 0 && r.stderr.isEmpty, "\(name): \(r.status) \(r.stderr)")
            let line = r.stdout.trimmingCharacters(in: .newlines)
            #expect(r.stdout == line + "\n", "\(name): one line, not \(r.stdout)")
            #expect(line.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)/) != nil,
                    "\(name): \(line)")
            lines.append(line)
        }
        #expect(Set(lines).count == 1, "one build, one version: \(lines)")
        // Built here, in a git checkout, by whatever `swift build`: the commit is known.
        let git = await TestSupport.run("/usr/bin/git", ["-C", Package.root.path, "rev-parse", "--short=12", "HEAD"], timeout: 30)
        if git.status == 0, let line = lines.first {
            #expect(!line.contains("unknown"), "a build in a git checkout names its commit: \(line)")
        }
    }
}
