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
}
