import PostgresNIO

extension PostgresStore: DeliveryCancellation {
    /// `CancelPlan`'s steps in one transaction. The first statement locks the free
    /// rows it finds (`Statements.cancelFree`): a claim skips them until this commits,
    /// and by then they have left the outbox; a row a claim took first is in flight.
    /// The notification's row is read FOR SHARE: a fan-out's last part (which
    /// updates it) either committed before, or waits for this to end, finding its
    /// plan as it was.
    public func cancelDeliveries(notificationID: String, now: Int64) async throws(StoreError) -> CancelledDeliveries? {
        let webhooks = webhookRouting.current
        return try await transaction("cancel notification \(notificationID)") { db -> CancelledDeliveries? in
            let found = try await db.rows("""
                SELECT planning_until IS NOT NULL FROM notifications WHERE id = \(notificationID) FOR SHARE
                """)
            guard let row = found.first else { return nil }
            if try row.get(0, Bool.self) { return .stillPlanning }
            var binds = PostgresBindings(capacity: 1)
            binds.append(notificationID)
            let free = Set(try await db.rows(PostgresQuery(unsafeSQL: Statements.cancelFree.postgres, binds: binds))
                .map { try $0.get(0, Int64.self) })
            binds.append(free.sorted())
            let facts = try await db.rows(PostgresQuery(unsafeSQL: Statements.cancelFacts.postgres, binds: binds))
                .map(CancelFact.init)
            let plan = CancelPlan(notificationID: notificationID, free: free, facts: facts)
            if !plan.leave.isEmpty {
                var ids = PostgresBindings(capacity: 1)
                ids.append(plan.leave)
                try await db.run(PostgresQuery(unsafeSQL: Statements.cancelLeaveOutbox.postgres, binds: ids))
            }
            if !plan.cancel.isEmpty {
                var cancel = PostgresBindings(capacity: 2)
                cancel.append(now)
                cancel.append(plan.cancel)
                try await db.run(PostgresQuery(unsafeSQL: Statements.cancelDeliveries.postgres, binds: cancel))
            }
            for r in plan.recarry {
                var recarry = PostgresBindings(capacity: 3)
                recarry.append(r.carrier)
                recarry.append(r.from)
                recarry.append(Int64(r.members))
                try await db.run(PostgresQuery(unsafeSQL: Statements.recarry.postgres, binds: recarry))
            }
            try await Self.recordCompletionChecks(db, webhooks, ids: plan.cancel, now: now)
            return plan.result
        }
    }
}
