/// `ScheduledSends`, once for both engines (statements and mapping in
/// `ScheduleStatements`).
extension StoreEngine {
    public func schedule(_ s: NewSchedule, now: Int64) async throws(StoreError) -> String? {
        try await writing("schedule a notification") { c in
            var superseded: String?
            if let key = s.scheduleKey {
                // PostgreSQL's writers run at once: schedules with one key, on any
                // instances, take the key's lock first, so that each supersedes the
                // one committed before it. SQLite's one writer needs no lock.
                if c.engine == .postgres {
                    try await c.run(ScheduleStatements.lockKey, [s.appType, s.kind, key])
                }
                superseded = try await c.row(ScheduleStatements.supersede, [s.id, now, s.appType, key, s.kind])
                    .map { try $0.string(0) }
            }
            try await c.run(ScheduleStatements.insert, [s.id, s.kind, s.appType, s.type, s.scheduleKey,
                                                        StoreValue.blob(s.request), s.sendAt, now])
            return superseded
        }
    }

    public func claimDueSchedules(worker: String, limit: Int, leaseMillis: Int64,
                                  now: Int64) async throws(StoreError) -> [ScheduleRow] {
        try await writing("claim due schedules") { c in
            try await c.rows(ScheduleStatements.claimDue, [worker, now + leaseMillis, now, limit])
                .map(ScheduleRow.init).sorted { $0.schedule.sendAt < $1.schedule.sendAt }
        }
    }

    public func finishSchedule(id: String, worker: String, state: String, error: String?,
                               now: Int64) async throws(StoreError) -> Bool {
        try await writing("finish a schedule") { c in
            try await !c.rows(ScheduleStatements.finish, [state, error, now, id, worker]).isEmpty
        }
    }

    public func cancelSchedule(id: String, now: Int64) async throws(StoreError) -> ScheduleRow? {
        try await writing("cancel a schedule") { c in
            try await c.run(ScheduleStatements.cancel, [now, id])
            return try await c.row(ScheduleStatements.byID, [id]).map(ScheduleRow.init)
        }
    }

    public func scheduled(id: String) async throws(StoreError) -> ScheduleRow? {
        try await reading("read a schedule") { c in
            try await c.row(ScheduleStatements.byID, [id]).map(ScheduleRow.init)
        }
    }

    public func pendingSchedules() async throws(StoreError) -> Int {
        try await reading("count schedules") { c in Int(try await c.int64(ScheduleStatements.pending, []) ?? 0) }
    }

    public func pruneSchedules(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await writing("prune schedules") { c in
            try await c.rows(ScheduleStatements.prune, [cutoff, limit]).count
        }
    }
}
