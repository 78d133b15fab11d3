import Foundation
import Testing
import TestSupport

/// A backend embeds the library by naming this package, at a version, in its own
/// Package.swift. SwiftPM then refuses any target with unsafe build flags, so the
/// manifest, evaluated where SwiftPM checks a dependency out (a `checkouts/` folder
/// of the backend's build), must have none.
@Suite struct PackageDependencyTests {
    @Test func asAnotherPackagesDependencyTheManifestHasNoUnsafeFlags() async throws {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("apns-dependency-\(UUID().uuidString)/checkouts/apns-engine")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder.deletingLastPathComponent().deletingLastPathComponent()) }
        try FileManager.default.copyItem(at: Package.root.appendingPathComponent("Package.swift"),
                                         to: folder.appendingPathComponent("Package.swift"))

        let dumped = await run("/usr/bin/env", ["swift", "package", "--package-path", folder.path, "dump-package"],
                               timeout: 300)
        try #require(dumped.status == 0, "\(dumped.stderr)")
        let manifest = try #require(try JSONSerialization.jsonObject(with: Data(dumped.stdout.utf8)) as? [String: Any])
        let targets = try #require(manifest["targets"] as? [[String: Any]])
        #expect(targets.contains { $0["name"] as? String == "CAPNs" })
        for target in targets {
            let settings = target["settings"] as? [[String: Any]] ?? []
            let unsafe = settings.filter { ($0["kind"] as? [String: Any])?["unsafeFlags"] != nil }
            #expect(unsafe.isEmpty, "\(target["name"] ?? "?") has unsafe flags: \(unsafe)")
        }
    }

    /// The library and the two tools a host runs take FoundationEssentials, never the
    /// whole of Foundation: linked statically, Foundation brings ICU's data (about 35 MB)
    /// into each binary, and its metadata into every start (relocations, page faults,
    /// the runtime's conformance scans), which a per-event `apns-send` pays each time.
    @Test func theLibraryAndTheCommandLineToolsDoNotImportAllOfFoundation() throws {
        let whole = try Regex(#"^\s*(@\w+\s+)*((public|package|internal|private|fileprivate)\s+)?import\s+((class|struct|enum|protocol|func|var|let|typealias)\s+)?Foundation(\s|\.|$)"#)
        var found: [String] = []
        for folder in ["APNs", "APNsMock", "apns-send", "apns-mock"] {
            let root = Package.root.appendingPathComponent("Sources/\(folder)")
            let files = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
            for case let file as URL in files where file.pathExtension == "swift" {
                for (n, line) in try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where line.contains(whole) {
                    found.append("Sources/\(folder)/\(file.lastPathComponent):\(n + 1): \(line)")
                }
            }
        }
        #expect(found.isEmpty, "import FoundationEssentials instead:\n\(found.joined(separator: "\n"))")
    }
}
