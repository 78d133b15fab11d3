/// A fan-out written in parts, so that memory holds one part of its audience and
/// never the whole of it, and sent whole or not at all.
///
/// The service reads the audience a page at a time, plans each page's deliveries
/// and writes them (`addFanOutPart`), each part in its own transaction. Meanwhile
/// the notification is marked as planning (`notifications.planning_until`) and its
/// deliveries are in the log but not in the outbox, so no worker of any instance
/// sends a part of a plan that a crash could leave unfinished. `completeFanOut`
/// enters them all in the outbox and clears the mark, in one transaction.
///
/// A plan whose planner died is discarded whole (`discardPlans`): it was never
/// answered, and nothing of it was sent. The mark is when it may be: the planner
/// moves it on with every part.
public protocol FanOutPlans {
    /// A page of a company's recipients, as `recipients(appType:audience:)` reads the
    /// whole company: up to `limit` users with an active token of the app in the
    /// company, by user id (bytewise) after `after`, each with their saved
    /// preferences and their active iOS tokens of the company (none: an
    /// Android-only user). Empty after the last page.
    func recipients(appType: String, company: String, after: String?,
                    limit: Int) async throws(StoreError) -> [Recipient]

    /// Writes the notification, marked as planning until `planningUntil`.
    func beginFanOut(_ notification: NewNotification, now: Int64, planningUntil: Int64) async throws(StoreError)

    /// Writes one part of a planning notification's deliveries (in the log, not in
    /// the outbox) with the payloads it does not have yet, and moves the mark on
    /// to `planningUntil`. `payloads` are the payload rows written so far (bytes to
    /// row id), returned with this part's: each distinct payload is one row for the
    /// whole fan-out. Throws when the plan is no longer planning (discarded).
    func addFanOutPart(_ notification: NewNotification, _ deliveries: [NewDelivery], payloads: [[UInt8]: Int64],
                       now: Int64, planningUntil: Int64) async throws(StoreError) -> [[UInt8]: Int64]

    /// Ends a plan, in one transaction: the deliveries with a hold (`held`, as
    /// written by the parts) join their devices' windows, every pending delivery
    /// enters the outbox, free for any worker, and the mark is cleared. Throws when
    /// the plan is no longer planning.
    func completeFanOut(_ notification: NewNotification, held: [NewDelivery], payloads: [[UInt8]: Int64],
                        now: Int64) async throws(StoreError)

    /// Claims for `worker`, until `now + leaseMillis`, up to `limit` of the
    /// notification's deliveries that are free and due in the outbox, by id after
    /// `after`, and returns them as a claim does: a completed fan-out handed to the
    /// enqueuing process's loops a page at a time, without claims that walk the
    /// whole outbox.
    func leaseFanOutPage(notificationID: String, worker: String, after: Int64, limit: Int,
                         leaseMillis: Int64, now: Int64) async throws(StoreError) -> [ClaimedDelivery]

    /// Discards the notification's plan (the notification, its deliveries and
    /// payloads) if it is still planning and its mark ran out before `markBefore`
    /// (`.max`: whatever its mark). Says what it found.
    func discardPlan(notificationID: String, markBefore: Int64) async throws(StoreError) -> PlanDiscard

    /// Discards every plan whose mark ran out before `before`; returns how many.
    func discardPlans(before: Int64) async throws(StoreError) -> Int
}

/// What `FanOutPlans.discardPlan` found.
public enum PlanDiscard: Sendable, Equatable {
    /// No such notification, or one whose plan is complete: nothing changed.
    case noPlan
    /// It was planning, and is gone.
    case discarded
    /// It is planning and its mark has not run out: its planner may be at work.
    case stillPlanning
}
