/// One delivery as a cancel reads it: the columns `Statements.cancelFacts` selects,
/// in that order, on either engine.
struct CancelFact: Equatable {
    let id: Int64
    let notificationID: String
    let state: String
    let carriedBy: Int64?
    /// A carrier's count of members; 0 for any other delivery.
    let batched: Int
    /// In the outbox (waiting, or held by a worker).
    let queued: Bool
    /// APNs answered it (a `results` row).
    let answered: Bool

    init(id: Int64, notificationID: String, state: String, carriedBy: Int64?, batched: Int, queued: Bool,
         answered: Bool) {
        self.id = id
        self.notificationID = notificationID
        self.state = state
        self.carriedBy = carriedBy
        self.batched = batched
        self.queued = queued
        self.answered = answered
    }

    init(_ row: some StoreRow) throws {
        self.init(id: try row.int64(0), notificationID: try row.string(1), state: try row.string(2),
                  carriedBy: try row.optionalInt64(3), batched: try row.int(4), queued: try row.bool(5),
                  answered: try row.bool(6))
    }
}

/// What cancelling a notification does, once for both engines. The cancel
/// (`Cancellation.swift`) first takes the outbox rows that are still free
/// (unclaimed) among the notification's deliveries and the carriers of its batched
/// members, so that no claim can take them meanwhile (`free`), then reads the facts
/// of the notification's deliveries, of those carriers, and of the free carriers'
/// members, and runs these steps.
struct CancelPlan: Equatable {
    /// A carrier that goes on for other notifications' members: it takes the
    /// latest one's payload and headers, and that member's notification (so that
    /// the cancelled notification's log no longer holds a send that is not its own).
    struct Recarry: Equatable {
        let carrier: Int64
        let from: Int64
        let members: Int
    }

    /// To become `cancelled`, in id order.
    private(set) var cancel: [Int64] = []
    /// Those of `cancel` to take out of the outbox (members never were in it).
    private(set) var leave: [Int64] = []
    private(set) var recarry: [Recarry] = []
    private(set) var result = CancelledDeliveries(cancelled: 0, alreadySent: 0, inFlight: 0)

    init(notificationID: String, free: Set<Int64>, facts: [CancelFact]) {
        let byID = Dictionary(facts.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var cancelled = Set<Int64>()
        var moved = Set<Int64>()
        for carrier in facts where carrier.batched > 0 && free.contains(carrier.id) {
            let members = facts.filter { $0.state == "batched" && $0.carriedBy == carrier.id }
            let theirs = members.filter { $0.notificationID != notificationID }
            let ours = members.filter { $0.notificationID == notificationID }
            cancelled.formUnion(ours.map(\.id))
            if let latest = theirs.max(by: { $0.id < $1.id }) {
                if !ours.isEmpty || carrier.notificationID == notificationID {
                    recarry.append(Recarry(carrier: carrier.id, from: latest.id, members: theirs.count))
                    if carrier.notificationID == notificationID { moved.insert(carrier.id) }
                }
            } else {
                cancelled.insert(carrier.id)
            }
        }
        for d in facts where d.notificationID == notificationID && d.batched == 0 && free.contains(d.id) {
            cancelled.insert(d.id)
        }
        cancel = cancelled.sorted()
        leave = cancel.filter(free.contains)

        for d in facts where d.notificationID == notificationID && !moved.contains(d.id) {
            if cancelled.contains(d.id) {
                result.cancelled += 1
                continue
            }
            // A member went (or goes) with its carrier.
            let send = d.state == "batched" ? d.carriedBy.flatMap { byID[$0] } : d
            guard let send else { continue }
            if send.answered {
                result.alreadySent += 1
            } else if send.queued && !free.contains(send.id) {
                result.inFlight += 1
            }
        }
    }
}
