/// What a held delivery does to its device's window (see `Hold`): the steps, once
/// for both engines. Each engine finds the delivery's row and the window open for
/// it (a window is open while its time has not run out and its delivery still
/// waits unclaimed in the outbox: once a worker holds the carrier, its payload is
/// on the way, and a newcomer opens the next window instead of changing it), then
/// runs these steps in order with its own statements.
enum HoldStep: Equatable {
    /// A delivery: one already written, or the carrier an `openCarrier` step wrote.
    enum Delivery: Equatable {
        case id(Int64)
        case newCarrier

        /// Its row, `newCarrier` being the row the `openCarrier` step wrote.
        func row(newCarrier: Int64) -> Int64 {
            switch self {
            case .id(let id): id
            case .newCarrier: newCarrier
            }
        }
    }

    /// The open window's carrier takes the member's payload and headers and counts
    /// one more. The window keeps its own close; only a member held past its hold's
    /// `closesAt` (quiet hours began meanwhile) holds the window's send until `until`.
    case join(carrier: Int64, until: Int64?)
    /// A new window's carrier: a new delivery with this apns-id and collapse id, the
    /// member's payload and headers, waiting until `notBefore`, standing for one.
    case openCarrier(apnsID: String, collapseID: String, notBefore: Int64)
    /// The delivery is the window's from now on (its `holds` row).
    case keep(Delivery)
    /// `delivery` is final, `state` ("batched" or "superseded"), carried by (or
    /// replaced by) `by`: it never waits itself.
    case carry(Delivery, by: Delivery, state: String)
    /// Out of the outbox: a superseded delivery is never sent.
    case leaveOutbox(Int64)
}

enum HoldsPlan {
    /// The steps for `delivery` (row `id`, hold `hold`), given the window open for
    /// it now (its delivery's row), or nil when none is.
    static func steps(for delivery: NewDelivery, id: Int64, hold: Hold, open: Int64?) -> [HoldStep] {
        switch hold.kind {
        case .coalesce(let carrierAPNsID, let carrierCollapseID):
            if let open {
                let later: Int64? = if let n = delivery.notBefore, n > hold.closesAt { n } else { nil }
                return [.join(carrier: open, until: later),
                        .carry(.id(id), by: .id(open), state: "batched")]
            }
            return [.openCarrier(apnsID: carrierAPNsID, collapseID: carrierCollapseID,
                                 notBefore: delivery.notBefore ?? hold.closesAt),
                    .keep(.newCarrier),
                    .carry(.id(id), by: .newCarrier, state: "batched")]
        case .defer:
            // Quiet hours' defer with a collapse id: the later delivery replaces the
            // one still held.
            guard let open else { return [.keep(.id(id))] }
            return [.carry(.id(open), by: .id(id), state: "superseded"),
                    .leaveOutbox(open),
                    .keep(.id(id))]
        }
    }
}
