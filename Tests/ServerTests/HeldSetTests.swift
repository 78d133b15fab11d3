import Testing
@testable import Service
@testable import ServiceWorkers

/// The worker loop's held deliveries, and which of them a renewal tick extends.
@Suite struct HeldSetTests {
    /// Ids leased since the last tick are left alone at this one and renewed at the
    /// next; removed ids are never renewed.
    @Test func aTickRenewsWhatWasLeasedBeforeThePreviousTick() {
        let held = HeldSet([1, 2])
        #expect(held.dueForRenewal() == [], "leased since the last tick")
        #expect(Set(held.dueForRenewal()) == [1, 2])
        held.insert([3])
        held.remove([2])
        #expect(held.count == 2)
        #expect(held.dueForRenewal() == [], "1 was renewed at the last tick, 3 since")
        #expect(Set(held.dueForRenewal()) == [1, 3])
        held.remove([1, 3])
        #expect(held.count == 0)
        #expect(held.dueForRenewal() == [] && held.dueForRenewal() == [])
    }

    /// A renewal that failed is due again at the very next tick.
    @Test func aFailedRenewalIsDueAtTheNextTick() {
        let held = HeldSet([7, 8])
        _ = held.dueForRenewal()
        let due = held.dueForRenewal()
        #expect(Set(due) == [7, 8])
        held.remove([8])
        held.renewalFailed(due)
        #expect(held.dueForRenewal() == [7])
        #expect(held.count == 1)
    }
}
