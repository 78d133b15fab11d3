/// How a result file is written.
enum OutputFormat: String, CaseIterable {
    /// One JSON object per line.
    case jsonl
    /// RFC 4180: a header line, then one row per record, CRLF line ends.
    case csv
}

/// Which fields a record has: a `PAYLOAD TOKENS` run's six, or a `--messages`
/// run's six plus the input line, the message's id and (CSV only; JSON Lines
/// always carries it when there is one) the error text.
enum RecordLayout: Equatable {
    case tokens
    case messages

    /// The record's fields, in order: JSON keys and CSV columns alike.
    static let tokenColumns = ["token", "status", "apns_id", "reason", "timestamp", "attempts"]

    var columns: [String] {
        switch self {
        case .tokens: RecordLayout.tokenColumns
        case .messages: RecordLayout.tokenColumns + ["line", "id", "error"]
        }
    }

    /// The CSV header line, CRLF included.
    var csvHeader: [UInt8] {
        Array((columns.joined(separator: ",") + "\r\n").utf8)
    }
}

/// Where a message record came from: its line in the messages file (1-based) and
/// the message's own id, when it gave one.
struct LineContext: Sendable, Hashable {
    let line: Int
    let id: String?
}
