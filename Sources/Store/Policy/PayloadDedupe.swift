/// The payloads of a claim's rows, one array per run of equal bytes. Deliveries of
/// one notification share their payload and come out of a claim side by side, so
/// a batch of a fan-out holds one array for all of them (the service compares the
/// arrays it sends by identity first, and a 100k fan-out copies its bytes once).
struct SharedPayloads<Bytes: Equatable> {
    private var last: (bytes: Bytes, payload: [UInt8])?

    /// `bytes` as an array: the previous row's array when the bytes are the same.
    mutating func payload(_ bytes: Bytes, copy: (Bytes) -> [UInt8]) -> [UInt8] {
        if let last, last.bytes == bytes { return last.payload }
        let payload = copy(bytes)
        last = (bytes, payload)
        return payload
    }
}
