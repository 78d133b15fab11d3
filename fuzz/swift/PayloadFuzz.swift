// PayloadFuzz.swift - libFuzzer entry for the Swift-side validators, compiled
// together with the real sources (scripts/fuzz.sh: JSONCompactor.swift,
// DeviceToken.swift), so nothing here is a copy.
//
// Properties, beyond "no trap": compacting is idempotent (compact output
// compacts to itself), never grows the input, and keeps the object-ness;
// a parsed device token is lower-case hex of an allowed length, and parsing
// its own text gives it back.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    checkCompactor(bytes)
    checkDeviceToken(bytes)
    return 0
}

private func checkCompactor(_ bytes: [UInt8]) {
    guard let first = try? JSONCompactor.compact(bytes) else { return }
    precondition(first.bytes.count <= bytes.count, "compacting grew the payload")
    guard let again = try? JSONCompactor.compact(first.bytes) else {
        preconditionFailure("compact output is not valid JSON")
    }
    precondition(again.bytes == first.bytes, "compacting is not idempotent")
    precondition(again.isObject == first.isObject, "compacting changed the top-level kind")
}

private func checkDeviceToken(_ bytes: [UInt8]) {
    let text = String(decoding: bytes, as: UTF8.self)
    guard let token = DeviceToken(text) else { return }
    let hex = Array(token.hex.utf8)
    precondition(DeviceToken.lengthRange.contains(hex.count) && hex.count % 2 == 0, "bad token length")
    precondition(hex.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }, "not lower-case hex")
    precondition(DeviceToken(token.hex) == token, "a token does not parse back to itself")
}
