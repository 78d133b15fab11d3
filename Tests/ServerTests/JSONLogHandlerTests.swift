import Foundation
import Logging
import Testing
@testable import Service

/// `log_format: json`'s lines: whatever a message or a metadata value holds (quotes,
/// new lines, control characters), the line is one JSON object that reads back as written.
@Suite struct JSONLogHandlerTests {
    @Test func aLineIsOneObjectWhateverItHolds() throws {
        let message = "line one\nline \"two\"\t\\ \u{1}\u{7f}\u{2028} é 🚀"
        let line = JSONLogHandler.line(
            time: Date(timeIntervalSince1970: 1_767_225_600.1235), level: .warning, message: message, label: "apns-server",
            metadata: ["app": "staff", "error": "\(message)", "message": "shadowed", "count": .stringConvertible(3)])
        #expect(line.hasSuffix("}\n") && line.dropLast().firstIndex(of: "\n") == nil, "\(line)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object == ["time": "2026-01-01T00:00:00.123Z", "level": "warning", "message": message, "logger": "apns-server",
                           "app": "staff", "error": message, "meta.message": "shadowed", "count": "3"])
        #expect(line.hasPrefix(#"{"time":"2026-01-01T00:00:00.123Z","level":"warning","message":"#))
    }

    /// The handler a json config gets writes what it is given, at its level and above.
    @Test func theHandlerWritesAtItsLevel() throws {
        let lines = LockedLines()
        var logger = Logger(label: "t") { JSONLogHandler(label: $0, level: .info, write: { lines.append($0) }) }
        logger[metadataKey: "worker"] = "w1"
        logger.debug("not written")
        logger.info("written", metadata: ["apns_id": "A"])
        let written = lines.all
        #expect(written.count == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(written[0].utf8)) as? [String: String])
        #expect(object["message"] == "written" && object["apns_id"] == "A" && object["worker"] == "w1" && object["logger"] == "t")
    }
}

final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var all: [String] { lock.withLock { lines } }
    func append(_ line: String) { lock.withLock { lines.append(line) } }
}
