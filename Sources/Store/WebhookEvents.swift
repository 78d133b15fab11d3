// Webhook events, once for both engines: written inside the transactions that make
// the changes they report (the `record…` functions, called by finish, cancel and
// finishBroadcast), and claimed and finished by the webhook worker like a small
// outbox of their own (SKIP LOCKED on PostgreSQL, so that the workers of several
// instances never send one event at once). Statements in `WebhookEventsStatements`.

extension StoreEngine {
    public func routeWebhooks(_ routes: WebhookRoutes) { webhookRouting.set(routes) }

    /// `delivery.failed` for each of these deliveries that failed (their results
    /// written in this transaction).
    static func recordFailedDeliveries<C: StoreConnection>(_ c: C, _ routes: WebhookRoutes, ids: [Int64],
                                                           now: Int64) async throws {
        let urls = routes.urls(for: .deliveryFailed)
        guard !urls.isEmpty, !ids.isEmpty else { return }
        try await c.run(WebhookEventsStatements.failedDeliveries, [ids, StoreValue.list(urls), now])
    }

    /// `token.deactivated` for the device if this transaction deactivated it (its
    /// `deactivated_at` is `now`); `apnsTimestamp` is APNs' time of the 410, if any.
    static func recordDeactivation<C: StoreConnection>(_ c: C, _ routes: WebhookRoutes, deviceID: Int64,
                                                       apnsTimestamp: Int64?, now: Int64) async throws {
        let urls = routes.urls(for: .tokenDeactivated)
        guard !urls.isEmpty else { return }
        try await c.run(WebhookEventsStatements.deactivation, [deviceID, StoreValue.list(urls), now, apnsTimestamp])
    }

    /// Marks the notifications of these finished deliveries (and of those they
    /// carried) to be looked at by `completeNotifications`.
    static func recordCompletionChecks<C: StoreConnection>(_ c: C, _ routes: WebhookRoutes, ids: [Int64],
                                                           now: Int64) async throws {
        guard !routes.urls(for: .notificationCompleted).isEmpty, !ids.isEmpty else { return }
        try await c.run(WebhookEventsStatements.completionChecks, [ids, now])
    }

    /// `broadcast.completed` for the broadcast just finished.
    static func recordBroadcast<C: StoreConnection>(_ c: C, _ routes: WebhookRoutes, id: String,
                                                    now: Int64) async throws {
        let urls = routes.urls(for: .broadcastCompleted)
        guard !urls.isEmpty else { return }
        try await c.run(WebhookEventsStatements.broadcast, [id, StoreValue.list(urls), now])
    }

    /// One write transaction per pass: the checks due (locked on PostgreSQL: another
    /// instance's pass skips them), each either completed (its events written once,
    /// the check deleted) or put off. Looked at under the writer: a finish or a cancel
    /// that ended the last pending delivery either committed before (and is seen
    /// here) or marks the check again after. (A look outside the write transaction
    /// could be stale, and a mark in the same millisecond would not tell.)
    public func completeNotifications(limit: Int, recheckMillis: Int64, now: Int64) async throws(StoreError) -> Int {
        let urls = webhookRouting.current.urls(for: .notificationCompleted)
        return try await writing("complete notifications") { c in
            let due = try await c.rows(WebhookEventsStatements.dueChecks, [now, limit]).map { try $0.string(0) }
            guard !due.isEmpty else { return 0 }
            let pending = Set(try await c.rows(WebhookEventsStatements.pendingNotifications, [StoreValue.list(due)])
                .map { try $0.string(0) })
            let complete = due.filter { !pending.contains($0) }
            if !pending.isEmpty {
                try await c.run(WebhookEventsStatements.recheck,
                                [now + recheckMillis, StoreValue.list(due.filter(pending.contains))])
            }
            guard !complete.isEmpty else { return 0 }
            if !urls.isEmpty {
                try await c.run(WebhookEventsStatements.completed, [StoreValue.list(complete), StoreValue.list(urls), now])
            }
            try await c.run(WebhookEventsStatements.deleteChecks, [StoreValue.list(complete)])
            return complete.count
        }
    }

    public func claimWebhookEvents(worker: String, limit: Int, leaseMillis: Int64,
                                   now: Int64) async throws(StoreError) -> [WebhookEvent] {
        guard limit > 0 else { return [] }
        return try await writing("claim webhook events") { c in
            try await c.rows(WebhookEventsStatements.claim, [now + leaseMillis, worker, now, limit])
                .map(WebhookEvent.init).sorted { $0.id < $1.id }
        }
    }

    public func finishWebhookEvents(worker: String, _ ends: [WebhookAttemptEnd],
                                    now: Int64) async throws(StoreError) {
        guard !ends.isEmpty else { return }
        try await writing("finish webhook events") { c in
            try await c.run(WebhookEventsStatements.finish, [WebhookAttemptEnd.rows(ends, now: now), worker])
        }
    }

    public func webhookEvents(state: String?, limit: Int, after: Int64?) async throws(StoreError) -> [WebhookEventView] {
        try await reading("list webhook events") { c in
            try await c.rows(WebhookEventsStatements.page, [state, after ?? 0, limit]).map(WebhookEventView.init)
        }
    }

    public func webhookEventCounts() async throws(StoreError) -> [String: Int] {
        try await reading("count webhook events") { c in
            var counts: [String: Int] = ["pending": 0, "failed": 0]
            for row in try await c.rows(WebhookEventsStatements.counts, []) {
                counts[try row.string(0)] = try row.int(1)
            }
            return counts
        }
    }

    public func pruneWebhookEvents(finishedBefore cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune webhook events") { c in
            try await c.rows(WebhookEventsStatements.prune, [cutoff, limit]).count
        }
    }
}
