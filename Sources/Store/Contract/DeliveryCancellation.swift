/// Taking back a notification already fanned out: what has not gone yet never goes.
public protocol DeliveryCancellation {
    /// Cancels every delivery of the notification that still waits unclaimed in the
    /// outbox: due, held (quiet hours, a coalescing window) or back for a retry. Each
    /// becomes `cancelled` in the log and leaves the outbox, in one transaction with
    /// respect to claims: a delivery is either claimed (and sent) or cancelled, never
    /// both. What a worker holds, or what already went, is counted and left as it is.
    ///
    /// A coalescing window's carrier that also carries other notifications' members
    /// keeps going for them, with the latest of theirs; one that carries only this
    /// notification's is cancelled with them. Nil when there is no such notification.
    ///
    /// A notification still being planned (see `FanOutPlans`) is left as it is, and
    /// the answer says so (`planning`): cancelling the parts written so far would
    /// let the rest go out when the plan completes.
    func cancelDeliveries(notificationID: String, now: Int64) async throws(StoreError) -> CancelledDeliveries?
}

/// What a cancel found, by the notification's deliveries (log rows).
public struct CancelledDeliveries: Sendable, Equatable {
    /// Cancelled now: they will never be sent.
    public var cancelled: Int
    /// Sent already (APNs answered, delivered or failed), or carried by a send that was.
    public var alreadySent: Int
    /// Held by a worker now (or carried by a send that is): left to finish.
    public var inFlight: Int
    /// The notification is still being fanned out: nothing was cancelled, ask again
    /// once it is complete.
    public var planning = false

    public init(cancelled: Int, alreadySent: Int, inFlight: Int) {
        self.cancelled = cancelled
        self.alreadySent = alreadySent
        self.inFlight = inFlight
    }

    /// What a cancel of a notification still being planned answers.
    public static var stillPlanning: CancelledDeliveries {
        var found = CancelledDeliveries(cancelled: 0, alreadySent: 0, inFlight: 0)
        found.planning = true
        return found
    }
}
