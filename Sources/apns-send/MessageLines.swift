import APNs

/// The messages of a `--messages` file as the library is fed them, read one line
/// at a time (memory holds the reader's buffer and the messages in flight, never
/// the file). Blank lines are skipped; a line a resumed results file settled is
/// skipped; every other line is either handed out as a message or, when it cannot
/// be sent, given its local record at once through `refused`. Repeats are not
/// merged: two lines to one token are two messages.
///
/// Line numbers are the file's own (1-based, blank lines counted), so a record's
/// "line" points at the line an editor shows.
final class MessageLines: Sequence, IteratorProtocol {
    /// The progress bar follows it.
    let reader: LineReader
    private let defaults: MessageDefaults
    private var settledLines = LineSet()
    private var lineNumber = 0
    /// The first non-blank line, read ahead by `hasMessageLines`.
    private var pending: (number: Int, bytes: [UInt8], cut: Bool)?
    /// Non-blank lines read so far (every one, whatever became of it).
    private(set) var messageLines = 0
    /// Lines skipped because the resumed file settled them.
    private(set) var settled = 0
    /// Lines refused locally (their records went to `refused`).
    private(set) var refusedCount = 0
    /// Why a read stopped early, if one did: later lines were not sent.
    private(set) var failure: String?
    /// Called with the local record of a line that is not sent; set before reading.
    var refused: (DeliveryResult, LineContext) -> Void = { _, _ in }

    init(path: String, defaults: MessageDefaults, resumed: ResumedResults?) throws(UsageError) {
        do { reader = try LineReader(path: path) } catch { throw UsageError(path, error.reason) }
        self.defaults = defaults
        var lines = LineSet()
        try resumed?.forEachSettledRecord { record in
            if let line = record.line { lines.insert(line) }
        }
        settledLines = lines
    }

    /// False when the file holds no message line at all (reads up to the first one).
    func hasMessageLines() -> Bool {
        if pending == nil { pending = nextNonBlank() }
        return pending != nil
    }

    func next() -> Message<LineContext>? {
        while let (number, bytes, cut) = pending ?? nextNonBlank() {
            pending = nil
            if settledLines.contains(number) {
                settled += 1
                continue
            }
            switch MessageLine.parse(bytes, line: number, defaults: defaults, cut: cut) {
            case .message(let message):
                return message
            case .refused(let record, let context):
                refusedCount += 1
                refused(record, context)
            }
        }
        return nil
    }

    /// After an interruption: how many lines were never read (or read and not yet
    /// answered are not counted here: they end in records). Settled lines are not counted.
    func countRemaining() -> Int {
        var n = 0
        while let (number, _, _) = pending ?? nextNonBlank() {
            pending = nil
            if !settledLines.contains(number) { n += 1 }
        }
        return n
    }

    private func nextNonBlank() -> (Int, [UInt8], Bool)? {
        while var line = reader.nextLine() {
            lineNumber += 1
            if lineNumber == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line.removeFirst(3) }   // a UTF-8 BOM
            if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
            messageLines += 1
            return (lineNumber, line, reader.lastLineCut)
        }
        if let error = reader.failure { failure = error }
        return nil
    }
}
