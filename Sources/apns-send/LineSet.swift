/// A set of line numbers (1-based), one bit a line: what `--resume` remembers of
/// a messages file's settled lines. A million lines cost 125 KB.
struct LineSet {
    private var words: [UInt64] = []
    private(set) var count = 0

    mutating func insert(_ line: Int) {
        guard line > 0 else { return }
        let (word, bit) = (line / 64, UInt64(1) << UInt64(line % 64))
        if word >= words.count { words += repeatElement(0, count: word - words.count + 1) }
        if words[word] & bit == 0 { count += 1 }
        words[word] |= bit
    }

    func contains(_ line: Int) -> Bool {
        guard line > 0 else { return false }
        let word = line / 64
        return word < words.count && words[word] & (UInt64(1) << UInt64(line % 64)) != 0
    }
}
