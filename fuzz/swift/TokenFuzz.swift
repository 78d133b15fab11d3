// TokenFuzz.swift - libFuzzer entry for apns-send's token-file reader and its
// --resume record reader, compiled together with the real sources
// (scripts/fuzz.sh: TokenLines.swift, TokenMemory.swift, BloomFilter.swift,
// RecordLine.swift, ResumedResults.swift, ...), so nothing here is a copy.
//
// Input: one byte choosing the Bloom filter's bits per token (1-16: small ones
// make most lines "maybe seen" and exercise the second read), the tokens file,
// then optionally three NUL bytes and a results file to resume from.
//
// Properties, beyond "no trap": TokenLines hands out exactly the lines a plain
// reading names (the first spelling of each distinct token, compared in ASCII
// lower case, minus the tokens the results file settled), each once, with the
// same counts of duplicates and settled lines.
import Glibc

private let folder: String = {
    var template = Array("/tmp/apns-token-fuzz-XXXXXX".utf8CString)
    return String(cString: mkdtemp(&template)!)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let bits = Int(bytes[0] % 16) + 1
    var tokens = Array(bytes[1...]), results: [UInt8]?
    if let cut = separator(in: tokens) {
        // A torn last record is repaired on disk, with a line on stderr: keep it whole.
        results = Array(tokens[(cut + 3)...]) + [0x0A]
        tokens = Array(tokens[..<cut])
    }
    let tokensPath = write(tokens, to: "tokens.txt")
    var resumed: ResumedResults?
    if let results {
        resumed = try? ResumedResults(path: write(results, to: "results"), format: nil)
        if resumed == nil { return 0 }
    }
    var settled = Set<[UInt8]>()
    do {
        try resumed?.forEachSettled { settled.insert(Array($0.lazy.map(asciiLowercased))) }
    } catch { return 0 }
    guard let lines = try? TokenLines(path: tokensPath, resumed: resumed, bitsPerToken: bits) else {
        preconditionFailure("a readable tokens file was refused")
    }
    var handed: [String: Int] = [:]
    while let line = lines.next() { handed[line, default: 0] += 1 }
    precondition(lines.failure == nil, "read failure on an unchanged file")

    let expected = reference(tokens, settled: settled)
    precondition(handed == expected.sent, "lines handed out differ from the plain reading")
    precondition(lines.duplicates == expected.duplicates, "duplicate count differs")
    precondition(lines.settled == expected.settled, "settled count differs")
    return 0
}

/// Tokens compare without regard to ASCII case: the reference's own spelling of it.
private func asciiLowercased(_ c: UInt8) -> UInt8 {
    c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z") ? c + 32 : c
}

/// The contract spelled out with a Set: what TokenLines must hand out.
private func reference(_ file: [UInt8], settled: Set<[UInt8]>) -> (sent: [String: Int], duplicates: Int, settled: Int) {
    var seen = Set<[UInt8]>(), sent: [String: Int] = [:], duplicates = 0, skipped = 0
    for raw in file.split(separator: 0x0A, omittingEmptySubsequences: false) {
        let line = TokenLines.trimmed(Array(raw))
        if line.isEmpty || line.first == UInt8(ascii: "#") { continue }
        let key = Array(line.lazy.map(asciiLowercased))
        guard seen.insert(key).inserted else { duplicates += 1; continue }
        if settled.contains(key) { skipped += 1; continue }
        sent[String(decoding: line, as: UTF8.self), default: 0] += 1
    }
    return (sent, duplicates, skipped)
}

private func separator(in bytes: [UInt8]) -> Int? {
    guard bytes.count >= 3 else { return nil }
    return (0...(bytes.count - 3)).first { bytes[$0] == 0 && bytes[$0 + 1] == 0 && bytes[$0 + 2] == 0 }
}

private func write(_ bytes: [UInt8], to name: String) -> String {
    let path = folder + "/" + name
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0, "cannot write \(path)")
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        precondition(n > 0, "short write to \(path)")
        offset += n
    }
    close(fd)
    return path
}
