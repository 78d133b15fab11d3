import Foundation

/// A folder of throw-away files, removed when the test is done.
public final class Scratch {
    public let directory: URL

    public init() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-send-test-\(UUID().uuidString)")
        try! FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    public func file(_ name: String, _ text: String) -> String {
        file(name, Data(text.utf8))
    }

    public func file(_ name: String, _ data: Data) -> String {
        let url = directory.appendingPathComponent(name)
        try! data.write(to: url)
        return url.path
    }

    public func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}
