import GRDB

extension SQLiteStore: DeliveryCancellation {
    /// `CancelPlan`'s steps in one write transaction: no claim runs between the read
    /// of the free rows and their leaving the outbox (SQLite has one writer).
    public func cancelDeliveries(notificationID: String, now: Int64) async throws(StoreError) -> CancelledDeliveries? {
        let webhooks = webhookRouting.current
        return try await write("cancel notification \(notificationID)") { db -> CancelledDeliveries? in
            guard let planning = try Bool.fetchOne(db, sql: "SELECT planning_until IS NOT NULL FROM notifications WHERE id = ?",
                                                   arguments: [notificationID])
            else { return nil }
            if planning { return .stillPlanning }
            let free = Set(try Int64.fetchAll(db, sql: Statements.cancelFree.sqlite, arguments: [notificationID]))
            let facts = try Row.fetchAll(db, sql: Statements.cancelFacts.sqlite,
                                         arguments: [notificationID, jsonArray(free.sorted())]).map(CancelFact.init)
            let plan = CancelPlan(notificationID: notificationID, free: free, facts: facts)
            if !plan.leave.isEmpty {
                try db.execute(sql: Statements.cancelLeaveOutbox.sqlite, arguments: [jsonArray(plan.leave)])
            }
            if !plan.cancel.isEmpty {
                try db.execute(sql: Statements.cancelDeliveries.sqlite, arguments: [now, jsonArray(plan.cancel)])
            }
            for r in plan.recarry {
                try db.execute(sql: Statements.recarry.sqlite, arguments: [r.carrier, r.from, r.members])
            }
            try Self.recordCompletionChecks(db, webhooks, ids: plan.cancel, now: now)
            return plan.result
        }
    }
}
