import Foundation
import Testing
import TestSupport
@testable import Store

@Suite struct OpeningTests {
    @Test func theFolderIsCreatedAndTheSchemeIsDropped() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let store = try SQLiteStore(path: "sqlite:" + scratch.path("var/db/apns.db"))
        try await store.migrate()
        #expect(store.path == scratch.path("var/db/apns.db"))
        #expect(FileManager.default.fileExists(atPath: scratch.path("var/db/apns.db")))
    }

    @Test func theServicesStoreURLNamesAFile() {
        #expect(SQLiteStore.filePath("sqlite:var/apns.db") == "var/apns.db")
        #expect(SQLiteStore.filePath("sqlite:///srv/apns.db") == "/srv/apns.db")
        #expect(SQLiteStore.filePath("var/apns.db") == "var/apns.db")
    }

    @Test func commitsAreInTheWALBeforeTheyReturnAndFsyncedOnlyWhenAsked() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let normal = try await makeStore(scratch, "normal.db")
        #expect(try await normal.writerScalar("PRAGMA synchronous") == 1)  // NORMAL
        let full = try SQLiteStore(path: scratch.path("full.db"), durability: .powerLoss)
        #expect(try await full.writerScalar("PRAGMA synchronous") == 2)  // FULL
        #expect(try await normal.writerScalar("PRAGMA busy_timeout") == 5_000)
    }

    @Test func aBadPathIsOneClearLine() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let file = scratch.file("plain", "not a folder")
        #expect(openError(file + "/apns.db") == "cannot open \(file)/apns.db: not a directory")
        #expect(openError(scratch.directory.path) == "cannot open \(scratch.directory.path): is a directory")
        #expect(openError("sqlite:") == "cannot open the database: the path is empty")
        let junk = scratch.file("junk.db", String(repeating: "this is not SQLite\n", count: 100))
        #expect(openError(junk) == "cannot open \(junk): file is not a database")
    }

    @Test(.enabled(if: geteuid() != 0, "root ignores file permissions"))
    func aFolderWithoutPermissionIsNamed() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let locked = scratch.path("locked")
        try FileManager.default.createDirectory(atPath: locked, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o500])
        defer { chmod(locked, 0o700) }
        #expect(openError(locked + "/apns.db") == "cannot open \(locked)/apns.db: permission denied")
    }
}

/// The line a store that cannot open says, or nil when it opens.
func openError(_ path: String) -> String? {
    do {
        _ = try SQLiteStore(path: path)
        return nil
    } catch {
        return error.description
    }
}
