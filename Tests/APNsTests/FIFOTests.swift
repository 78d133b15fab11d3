import Testing
@testable import APNs

/// The lanes' waiting lines and the batches' ready results are FIFOs that fill and
/// drain all day without ever emptying: an element must be let go when it leaves.
@Suite struct FIFOTests {
    final class Tracked {
        let n: Int
        let alive: Counter
        init(_ n: Int, _ alive: Counter) { self.n = n; self.alive = alive; alive.value += 1 }
        deinit { alive.value -= 1 }
    }
    final class Counter { var value = 0 }

    @Test func keepsOrderAcrossWrapsAndGrowth() {
        var q = FIFO<Int>()
        var expected: [Int] = [], next = 0
        // Interleave pushes and pops so the ring wraps, then grows while wrapped.
        for round in 0..<200 {
            for _ in 0..<(round % 7 + 1) { q.append(next); expected.append(next); next += 1 }
            for _ in 0..<(round % 5) { #expect(q.popFirst() == (expected.isEmpty ? nil : expected.removeFirst())) }
            #expect(q.count == expected.count)
        }
        while let x = q.popFirst() { #expect(x == expected.removeFirst()) }
        #expect(expected.isEmpty && q.isEmpty)
    }

    @Test func anElementIsReleasedWhenItLeavesThoughTheQueueNeverEmpties() {
        let alive = Counter()
        var q = FIFO<Tracked>()
        q.append(Tracked(0, alive))
        for i in 1...10_000 {
            q.append(Tracked(i, alive))
            #expect(q.popFirst()?.n == i - 1)
        }
        #expect(alive.value == 1, "only the one still queued is alive")
        #expect(q.count == 1)
    }

    @Test func aRemovedMiddleElementLeavesAHoleThatIsSkipped() {
        let alive = Counter()
        var q = FIFO<Tracked>()
        for i in 0..<10 { q.append(Tracked(i, alive)) }
        #expect(q.removeFirst(where: { $0.n == 4 })?.n == 4)
        #expect(q.removeFirst(where: { $0.n == 42 }) == nil)
        #expect(alive.value == 9 && q.count == 9)
        // Growth with a hole inside compacts it away; order is kept.
        for i in 10..<40 { q.append(Tracked(i, alive)) }
        var out: [Int] = []
        while let t = q.popFirst() { out.append(t.n) }
        #expect(out == Array(0..<4) + Array(5..<40))
        #expect(alive.value == 0 && q.isEmpty)
    }
}
