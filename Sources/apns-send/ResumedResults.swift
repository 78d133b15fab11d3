import Glibc

/// `--resume FILE`: the records earlier runs wrote, read so that the tokens they
/// settled are not sent again; the run then appends its own records to the file.
///
/// A record settles its token when sending again could only repeat it: delivered
/// (200), or refused because of the token itself (400 BadDeviceToken or
/// DeviceTokenNotForTopic, 410, a malformed line). Every other record (429/5xx
/// after the retries, no answer, refusals of the credentials, topic or payload)
/// leaves its token to be sent again.
///
/// A `--messages` run resumes by line instead: a record settles its line (not its
/// token, which other lines may repeat) by the same rule, and a line refused
/// before sending (InvalidMessage, BadDeviceToken, PayloadTooLarge; status 0) is
/// settled too. Records of the other kind of run are refused: a token run's
/// records say nothing about lines, and a messages run's would settle tokens.
struct ResumedResults {
    let path: String
    let format: OutputFormat
    let layout: RecordLayout
    private let exists: Bool

    /// Opens `path` (a missing file is an empty one: nothing settled yet). A last
    /// line cut short by a killed run is cut off the file, so appended records start
    /// on a line of their own; its token is sent again.
    init(path: String, format requested: OutputFormat?, layout: RecordLayout = .tokens) throws(UsageError) {
        self.path = path
        let size: Int?
        do { size = try ResumedResults.dropTornLine(path) } catch { throw UsageError(path, error.reason) }
        exists = size != nil
        var first: [UInt8]?
        if exists {
            do { first = try LineReader(path: path).nextLine() } catch { throw UsageError(path, error.reason) }
        }
        let firstLine = first.map { $0.last == 0x0D ? Array($0.dropLast()) : $0 }
        let header = { (layout: RecordLayout) in Array(layout.csvHeader.dropLast(2)) }
        let other: RecordLayout = layout == .tokens ? .messages : .tokens
        if firstLine == header(other) {
            throw UsageError(path, ResumedResults.wrongKind(layout))
        }
        let found: OutputFormat? = firstLine.map { $0 == header(layout) ? .csv : .jsonl }
        if let found, let requested, found != requested {
            throw UsageError(path, "holds \(found.rawValue) records; --format \(requested.rawValue) cannot append to it")
        }
        format = found ?? requested ?? .jsonl
        self.layout = layout
    }

    private static func wrongKind(_ layout: RecordLayout) -> String {
        layout == .messages
            ? "holds records of a PAYLOAD TOKENS run (no \"line\"); --messages resumes by line and cannot resume from it"
            : "holds records of a --messages run (with \"line\"); a PAYLOAD TOKENS run cannot resume from it"
    }

    /// Calls `body` with the token of every record that settled it, trimmed, in file order. A line that is not a record stops the
    /// run before anything is sent: guessing could send a token twice.
    func forEachSettled(_ body: (ArraySlice<UInt8>) -> Void) throws(UsageError) {
        try forEachSettledRecord { record in body(TokenLines.trimmed(record.token)) }
    }

    /// Calls `body` with every record that settles its token (or line), in file order.
    func forEachSettledRecord(_ body: (RecordLine) -> Void) throws(UsageError) {
        guard exists else { return }
        let reader: LineReader
        do { reader = try LineReader(path: path) } catch { throw UsageError(path, error.reason) }
        var number = 0
        while let line = reader.nextLine() {
            number += 1
            if format == .csv && number == 1 { continue }
            let text = line.last == 0x0D ? Array(line.dropLast()) : line
            if text.isEmpty { continue }
            guard let record = format == .csv ? RecordLine.csv(text, layout: layout) : RecordLine.json(text) else {
                throw UsageError("\(path):\(number)", "not an apns-send \(format.rawValue) record; cannot resume from it")
            }
            if (record.line != nil) != (layout == .messages) {
                throw UsageError("\(path):\(number)", ResumedResults.wrongKind(layout))
            }
            if record.settles {
                body(record)
            }
        }
        if let failure = reader.failure { throw UsageError(path, failure) }
    }

    /// Truncates the file after its last "\n"; returns the size left (nil when missing).
    private static func dropTornLine(_ path: String) throws(LineReaderError) -> Int? {
        let fd = open(path, O_RDWR | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw LineReaderError(reason: String(cString: strerror(errno)))
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw LineReaderError(reason: String(cString: strerror(errno))) }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw LineReaderError(reason: "not a regular file") }
        var end = Int(st.st_size)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while end > 0 {
            let from = max(0, end - chunk.count)
            let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, end - from, off_t(from)) }
            guard n == end - from else { throw LineReaderError(reason: String(cString: strerror(errno))) }
            if let last = chunk[..<n].lastIndex(of: 0x0A) {
                let keep = from + last + 1
                if keep < Int(st.st_size) { try cut(fd, at: keep, path: path) }
                return keep
            }
            end = from
        }
        if st.st_size > 0 { try cut(fd, at: 0, path: path) }
        return 0
    }

    private static func cut(_ fd: Int32, at size: Int, path: String) throws(LineReaderError) {
        guard ftruncate(fd, off_t(size)) == 0 else { throw LineReaderError(reason: String(cString: strerror(errno))) }
        Stderr.line("\(path): the last record was cut short (an interrupted write); dropped, its token will be sent again")
    }
}
