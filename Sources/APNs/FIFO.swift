/// A first-in first-out queue on an array: O(1) amortized at both ends, and its
/// storage is kept for reuse once it empties (the queues here fill and drain all day).
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }

    mutating func append(_ item: Element) { items.append(item) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let item = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        }
        return item
    }

    /// Removes and returns the first element that matches (a cancelled waiter).
    mutating func removeFirst(where matches: (Element) -> Bool) -> Element? {
        guard let k = items[head...].firstIndex(where: matches) else { return nil }
        return items.remove(at: k)
    }
}
