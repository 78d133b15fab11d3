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

    public init(cancelled: Int, alreadySent: Int, inFlight: Int) {
        self.cancelled = cancelled
        self.alreadySent = alreadySent
        self.inFlight = inFlight
    }
}
