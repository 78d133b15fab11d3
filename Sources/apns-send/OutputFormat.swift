/// How a result file is written.
enum OutputFormat: String, CaseIterable {
    /// One JSON object per line.
    case jsonl
    /// RFC 4180: a header line, then one row per token, CRLF line ends.
    case csv

    /// The record's fields, in order: JSON keys and CSV columns alike.
    static let columns = ["token", "status", "apns_id", "reason", "timestamp", "attempts"]

    /// The CSV header line, CRLF included.
    static func csvHeader() -> [UInt8] {
        Array((columns.joined(separator: ",") + "\r\n").utf8)
    }
}
