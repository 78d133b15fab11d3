import Foundation
import Logging
import Store

/// `log_format: json`: one JSON object a line on stderr, for a log shipper to parse
/// without a pattern: `time` (UTC, ISO 8601 with milliseconds), `level`, `message`,
/// `logger` (the label), then the metadata's keys as they are (`notification_id`,
/// `apns_id`, `app`, `reason`, `error`…), every value a string. A metadata key that
/// would shadow one of the four keeps its value under a `meta.` prefix.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (String) -> Void

    public init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil,
                write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        log(level: event.level, message: event.message, metadata: event.metadata,
            source: event.source, file: event.file, function: event.function, line: event.line)
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?,
                    source: String, file: String, function: String, line: UInt) {
        var merged = self.metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let explicit { merged.merge(explicit) { _, new in new } }
        write(Self.line(time: Date(), level: level, message: message.description, label: label, metadata: merged))
    }

    static let reserved: Set<String> = ["time", "level", "message", "logger"]

    /// One line, its keys in a fixed order (the four, then the metadata's, sorted), so
    /// that two runs' logs diff line by line.
    static func line(time: Date, level: Logger.Level, message: String, label: String, metadata: Logger.Metadata) -> String {
        var out = "{\"time\":\"\(timestamp(time))\",\"level\":\"\(level.rawValue)\",\"message\":"
        JSONText.append(message, to: &out)
        out += ",\"logger\":"
        JSONText.append(label, to: &out)
        for key in metadata.keys.sorted() {
            out += ","
            JSONText.append(reserved.contains(key) ? "meta." + key : key, to: &out)
            out += ":"
            JSONText.append(flatten(metadata[key]!), to: &out)
        }
        out += "}\n"
        return out
    }

    /// A nested value (rare here) as the text format shows it.
    static func flatten(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return s
        case .stringConvertible(let c): return c.description
        case .array, .dictionary: return value.description
        }
    }

    /// 2026-01-31T12:34:56.789Z
    static func timestamp(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(millis % 1000))
    }

    /// Whole lines: one write(2) each, so that lines from several threads never interleave.
    public static let standardError: @Sendable (String) -> Void = { line in
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Foundation.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 { if errno == EINTR { continue } else { return } }
                offset += n
            }
        }
    }
}
