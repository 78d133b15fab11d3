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

/// An enqueue's payloads, each distinct one once (a fan-out has one per badge
/// value), in the order they first appear, and which of them each delivery has.
/// Each engine writes `payloads` as rows with its own statements and hands back
/// their ids in the same order. A delivery is compared with the one before it
/// first: the service shares one array per payload, so the identity check of ==
/// usually answers before any hashing.
struct DistinctPayloads {
    /// The distinct payloads, in order of first appearance.
    private(set) var payloads: [[UInt8]] = []
    /// For each delivery, its payload's index in `payloads`.
    private(set) var indexOf: [Int]

    init(_ deliveries: [NewDelivery]) {
        indexOf = [Int](repeating: 0, count: deliveries.count)
        var known: [[UInt8]: Int] = [:]
        for (i, d) in deliveries.enumerated() {
            if i > 0, deliveries[i - 1].payload == d.payload {
                indexOf[i] = indexOf[i - 1]
                continue
            }
            if let index = known[d.payload] {
                indexOf[i] = index
            } else {
                indexOf[i] = payloads.count
                known[d.payload] = payloads.count
                payloads.append(d.payload)
            }
        }
    }

    /// Each delivery's payload row, given the rows written for `payloads`, in order.
    func rows(_ ids: [Int64]) -> [Int64] {
        indexOf.map { ids[$0] }
    }
}

/// One part of a fan-out written in parts: its distinct payloads, of which those
/// an earlier part wrote already (`known`, bytes to row id) are not written again.
/// Each engine writes `new` as rows with its own statements and hands back their
/// ids in the same order.
struct PartPayloads {
    private let distinct: DistinctPayloads
    private let known: [[UInt8]: Int64]
    /// The payloads to write, in order of first appearance.
    let new: [[UInt8]]

    init(_ deliveries: [NewDelivery], known: [[UInt8]: Int64]) {
        distinct = DistinctPayloads(deliveries)
        self.known = known
        new = distinct.payloads.filter { known[$0] == nil }
    }

    /// Each delivery's payload row, given the rows written for `new`, in order.
    func rows(_ newIDs: [Int64]) -> [Int64] {
        distinct.rows(ids(newIDs))
    }

    /// Every payload row written so far, this part's included.
    func known(_ newIDs: [Int64]) -> [[UInt8]: Int64] {
        var all = known
        for (bytes, id) in zip(new, newIDs) { all[bytes] = id }
        return all
    }

    /// The row of each of `distinct.payloads`, in its order.
    private func ids(_ newIDs: [Int64]) -> [Int64] {
        var next = newIDs.makeIterator()
        return distinct.payloads.map { known[$0] ?? next.next()! }
    }
}
