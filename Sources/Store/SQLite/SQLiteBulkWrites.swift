import Foundation
import GRDB

extension SQLiteTransaction {
    /// Writes `payloads` as rows of the notification; returns their ids, in order.
    func insertPayloads(notificationID: String, _ payloads: [[UInt8]]) async throws -> [Int64] {
        let insertPayload = try db.cachedStatement(sql: """
            INSERT INTO payloads (notification_id, bytes) VALUES (?, ?)
            """)
        var ids: [Int64] = []
        ids.reserveCapacity(payloads.count)
        for payload in payloads {
            try insertPayload.execute(arguments: [notificationID, Data(payload)])
            ids.append(db.lastInsertedRowID)
        }
        return ids
    }

    /// Writes the log rows of `deliveries` (nothing in the outbox); `payloadOf[i]` is
    /// delivery i's payload row. Multi-row inserts: one statement execution per 256.
    func insertDeliveryRows(notificationID: String, _ deliveries: [NewDelivery], payloadOf: [Int64],
                            now: Int64) async throws {
        let notificationID = notificationID.databaseValue
        let created = now.databaseValue
        let empty = Data().databaseValue
        try db.executeChunked(count: deliveries.count, maxRows: 256, sql: { rows in
            """
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    payload_id, push_type, priority, collapse_id, expiration, created_at, not_before)
            VALUES \(placeholders(rows: rows, columns: 14))
            """
        }, bind: { i, values in
            let d = deliveries[i]
            values.append(notificationID)
            values.append(d.userID.databaseValue)
            values.append(d.deviceID.databaseValue)
            values.append(d.token.databaseValue)
            values.append(d.environment.databaseValue)
            values.append(d.apnsID.databaseValue)
            values.append(empty)
            values.append(payloadOf[i].databaseValue)
            values.append(d.pushType.databaseValue)
            values.append(d.priority.databaseValue)
            values.append(d.collapseID.databaseValue)
            values.append(d.expiration.databaseValue)
            values.append(created)
            values.append(d.notBefore.databaseValue)
        }, rows: nil)
    }

    /// A finish's first two steps (see `Finishes`): the batch's rows this worker
    /// holds leave the outbox (`held`: leaving it is the proof of holding), and each
    /// of those gets its result (`recorded`; nil: every one of `held`).
    ///
    /// Tried first without RETURNING, which SQLite carries out as a trigger program
    /// and a row per delivery: the usual batch is held whole (each outcome's row left
    /// the outbox) and recorded whole (a result is only written by the finish that
    /// took its delivery out of the outbox), and the counts of rows changed prove
    /// it. Otherwise (a duplicate in the batch, a lease another worker took over, a
    /// result already there) the same steps run again, under a savepoint rolled back
    /// to, with RETURNING naming the rows.
    func leaveOutboxAndRecord(worker: String, _ outcomes: [DeliveryOutcome],
                              now: Int64) async throws -> (held: [DeliveryOutcome], recorded: Set<Int64>?) {
        let ids = jsonArray(outcomes.map(\.deliveryID))
        var whole = false
        try db.inSavepoint {
            try db.cachedStatement(sql: Statements.finishLeaveOutbox.sqlite).execute(arguments: [worker, ids])
            whole = try db.changesCount == outcomes.count
                && insertResults(outcomes, now: now, rows: nil) == outcomes.count
            return whole ? .commit : .rollback
        }
        if whole { return (outcomes, nil) }
        let held = Finishes.held(outcomes, left: try Int64.fetchSet(
            db.cachedStatement(sql: Statements.finishLeaveOutboxReturning.sqlite), arguments: [worker, ids]))
        var recorded = Set<Int64>(minimumCapacity: held.count)
        try insertResults(held, now: now, rows: { id, _ in recorded.insert(id) })
        return (held, recorded)
    }

    /// One result per outcome, none over one already there; with `rows`, RETURNING
    /// gives the ids written. Returns how many were written.
    @discardableResult
    private func insertResults(_ outcomes: [DeliveryOutcome], now: Int64,
                               rows: ((Int64, Int64) -> Void)?) throws -> Int {
        let finishedAt = now.databaseValue
        let returning = rows == nil ? "" : "RETURNING delivery_id, delivery_id"
        return try db.executeChunked(count: outcomes.count, maxRows: 256, sql: { count in
            """
            INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
            VALUES \(placeholders(rows: count, columns: 7))
            ON CONFLICT (delivery_id) DO NOTHING \(returning)
            """
        }, bind: { i, values in
            let o = outcomes[i]
            values.append(o.deliveryID.databaseValue)
            values.append(Finishes.state(o).databaseValue)
            values.append(o.status.databaseValue)
            values.append(o.reason.databaseValue)
            values.append(o.timestamp.databaseValue)
            values.append(o.attempts.databaseValue)
            values.append(finishedAt)
        }, rows: rows)
    }
}
