/// A first-in first-out queue on a ring buffer: O(1) amortized at both ends.
///
/// An element is released the moment it leaves. (A queue that only advanced a head
/// index over an array kept every element ever queued alive until it next emptied,
/// and a lane's waiters never empty under steady load: 100k single sends from 20k
/// callers held all 100k requests.) A cancelled waiter is taken out of the middle
/// by leaving a hole, skipped when the head reaches it, so that is O(n) to find but
/// never moves the others.
struct FIFO<Element> {
    private var ring: [Element?] = []
    /// Ring index of the first position in use (an element or a hole).
    private var head = 0
    /// Positions in use from `head`, holes included.
    private var used = 0
    /// Elements, holes excluded.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ item: Element) {
        if used == ring.count { regrow() }
        ring[(head + used) % ring.count] = item
        used += 1
        count += 1
    }

    mutating func popFirst() -> Element? {
        while used > 0 {
            let i = head
            head = head + 1 == ring.count ? 0 : head + 1
            used -= 1
            if let item = ring[i].take() {   // moved out, the slot left nil: no copy to release
                count -= 1
                if used == 0 { head = 0 }
                return item
            }
        }
        head = 0
        return nil
    }

    /// Whether an element matches (a batch already in line).
    func contains(where matches: (Element) -> Bool) -> Bool {
        for offset in 0..<used {
            if let item = ring[(head + offset) % ring.count], matches(item) { return true }
        }
        return false
    }

    /// Removes and returns the first element that matches (a cancelled waiter).
    mutating func removeFirst(where matches: (Element) -> Bool) -> Element? {
        for offset in 0..<used {
            let i = (head + offset) % ring.count
            if let item = ring[i], matches(item) {
                ring[i] = nil
                count -= 1
                return item
            }
        }
        return nil
    }

    /// Full: copies the elements, in order and without holes, into a ring twice
    /// their number (or the same size, when holes were most of it).
    private mutating func regrow() {
        var next = [Element?](repeating: nil, count: max(16, count * 2))
        var k = 0
        for offset in 0..<used {
            if let item = ring[(head + offset) % ring.count] {
                next[k] = item
                k += 1
            }
        }
        ring = next
        head = 0
        used = k
    }
}
