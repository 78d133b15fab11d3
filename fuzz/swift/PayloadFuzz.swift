// PayloadFuzz.swift - libFuzzer entry for the Swift-side validators, compiled
// together with the real sources (scripts/fuzz.sh: JSONReader.swift,
// JSONString.swift, DeviceToken.swift), so nothing here is a copy.
//
// Properties, beyond "no trap": compacting is idempotent (compact output
// compacts to itself), never grows the input, and keeps the object-ness;
// reading value by value agrees with compacting on what is JSON; a parsed
// device token is lower-case hex of an allowed length, and parsing its own
// text gives it back.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkCompactor(bytes)
    checkReader(bytes)
    checkDeviceToken(bytes)
    return 0
}

private func checkCompactor(_ bytes: [UInt8]) {
    guard let first = try? JSONReader.compact(bytes) else { return }
    precondition(first.bytes.count <= bytes.count, "compacting grew the payload")
    guard let again = try? JSONReader.compact(first.bytes) else {
        preconditionFailure("compact output is not valid JSON")
    }
    precondition(again.bytes == first.bytes, "compacting is not idempotent")
    precondition(again.isObject == first.isObject, "compacting changed the top-level kind")
}

/// The reader's two walks agree: what `compact` takes, `skipValue` takes, and
/// decoding every key, string and number takes it too, unless an escape names no
/// character (a lone surrogate), which only decoding refuses.
private func checkReader(_ bytes: [UInt8]) {
    let compacted = try? JSONReader.compact(bytes)
    let skipped = try? JSONReader.read(bytes) { (r) throws(JSONReader.Failure) -> Range<Int> in
        let span = try r.skipValue()
        try r.end()
        return span
    }
    precondition((compacted == nil) == (skipped == nil), "compacting and skipping disagree on what is JSON")
    do {
        try JSONReader.read(bytes) { (r) throws(JSONReader.Failure) in
            try walk(&r)
            try r.end()
        }
        precondition(skipped != nil, "decoding took what skipping refused")
    } catch {
        guard skipped != nil else { return }
        guard case .syntax(_, let expected) = error, expected == "a low surrogate" || expected == "a Unicode scalar" else {
            preconditionFailure("decoding refused what skipping took: \(error)")
        }
    }
}

private func walk(_ r: inout JSONReader) throws(JSONReader.Failure) {
    switch r.peekKind() {
    case .object?: try r.members { (_, r) throws(JSONReader.Failure) in try walk(&r) }
    case .array?: try r.items { (r) throws(JSONReader.Failure) in try walk(&r) }
    case .string?: _ = try r.string()
    case .number?: _ = try r.number()
    case .bool?: _ = try r.bool()
    case .null?: _ = try r.null()
    case nil: _ = try r.skipValue()
    }
}

private func checkDeviceToken(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let token = DeviceToken(text) else { return }
    let hex = Array(token.hex.utf8)
    precondition(DeviceToken.lengthRange.contains(hex.count) && hex.count % 2 == 0, "bad token length")
    precondition(hex.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }, "not lower-case hex")
    precondition(DeviceToken(token.hex) == token, "a token does not parse back to itself")
}
