import Store

/// Where a fan-out hands its fresh deliveries, leased a page at a time, straight to a
/// worker loop of this process, so they go out without a claim query per batch. The
/// workers own the mailboxes (`Handoff`); the fan-out only asks for a loop with room
/// and gives it pages.
package protocol DeliveryHandoff: Sendable {
    /// How many deliveries a loop may hold handed and not yet taken.
    var limit: Int { get }
    /// The loop to lease the next fan-out to; nil when none has room or none runs.
    func lessee() -> String?
    /// `worker` still takes hand-offs.
    func isOpen(_ worker: String) -> Bool
    /// Handed to `worker` and not yet taken.
    func queued(_ worker: String) -> Int
    /// Gives `claimed`, leased to `worker`, to that loop; returns those it did not take,
    /// which the caller gives back to the outbox.
    func deliver(_ claimed: [ClaimedDelivery], to worker: String) -> ArraySlice<ClaimedDelivery>
}
