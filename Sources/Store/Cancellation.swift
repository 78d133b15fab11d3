/// `DeliveryCancellation`, once for both engines: `CancelPlan`'s steps in one write
/// transaction, with the statements `Statements.cancel…` and `Statements.recarry`.
///
/// No claim takes a free row between its read and its leaving the outbox: SQLite has
/// one writer; PostgreSQL's first statement locks the free rows it finds
/// (`Statements.cancelFree`), so that a claim skips them until this commits, and by
/// then they have left the outbox (a row a claim took first is in flight).
extension StoreEngine {
    public func cancelDeliveries(notificationID: String, now: Int64) async throws(StoreError) -> CancelledDeliveries? {
        let webhooks = webhookRouting.current
        return try await writing("cancel notification \(notificationID)") { c -> CancelledDeliveries? in
            guard let row = try await c.row(CancellationStatements.planning, [notificationID]) else { return nil }
            if try row.bool(0) { return .stillPlanning }
            let free = Set(try await c.rows(Statements.cancelFree, [notificationID]).map { try $0.int64(0) })
            let facts = try await c.rows(Statements.cancelFacts, [notificationID, free.sorted()]).map(CancelFact.init)
            let plan = CancelPlan(notificationID: notificationID, free: free, facts: facts)
            if !plan.leave.isEmpty {
                try await c.run(Statements.cancelLeaveOutbox, [plan.leave])
            }
            if !plan.cancel.isEmpty {
                try await c.run(Statements.cancelDeliveries, [now, plan.cancel])
            }
            for r in plan.recarry {
                try await c.run(Statements.recarry, [r.carrier, r.from, r.members])
            }
            try await Self.recordCompletionChecks(c, webhooks, ids: plan.cancel, now: now)
            return plan.result
        }
    }
}

enum CancellationStatements {
    /// Whether the notification's plan is still being carried out (no row: no such
    /// notification): 1 the notification. PostgreSQL reads it FOR SHARE: a fan-out's
    /// last part (which updates it) either committed before, or waits for the cancel
    /// to end, finding its plan as it was.
    static let planning = Spelling(
        sqlite: "SELECT planning_until IS NOT NULL FROM notifications WHERE id = ?1",
        postgres: "SELECT planning_until IS NOT NULL FROM notifications WHERE id = $1 FOR SHARE")
}
