import PostgresNIO

extension PostgresTransaction {
    /// Ids come from the sequence first, so that one INSERT writes them all and each
    /// delivery knows its payload's id without reading rows back.
    func insertPayloads(notificationID: String, _ payloads: [[UInt8]]) async throws -> [Int64] {
        guard !payloads.isEmpty else { return [] }
        let ids = try await connection.rows("""
            SELECT nextval('payloads_id_seq') FROM generate_series(1, \(payloads.count))
            """).map { try $0.get(0, Int64.self) }
        try await connection.run("""
            INSERT INTO payloads (id, notification_id, bytes)
            SELECT id, \(notificationID), bytes
            FROM unnest(\(ids)::bigint[], \(payloads.map { ByteBuffer(bytes: $0) })::bytea[]) AS p (id, bytes)
            """)
        return ids
    }

    /// Writes the log rows of `deliveries` (nothing in the outbox); `payloadOf[i]` is
    /// delivery i's payload row. Multi-row VALUES: the nullable columns (priority,
    /// collapse id, expiration) cannot travel in the arrays postgres-nio encodes.
    func insertDeliveryRows(notificationID: String, _ deliveries: [NewDelivery], payloadOf: [Int64],
                            now: Int64) async throws {
        for start in stride(from: 0, to: deliveries.count, by: PostgresStore.rowsPerStatement) {
            let end = min(start + PostgresStore.rowsPerStatement, deliveries.count)
            var binds = PostgresBindings(capacity: 3 + (end - start) * 11)
            binds.append(notificationID)
            binds.append(now)
            binds.append(ByteBuffer())
            var values: [String] = []
            values.reserveCapacity(end - start)
            for i in start..<end {
                let d = deliveries[i]
                let first = binds.count + 1
                binds.append(d.userID)
                binds.append(d.deviceID)
                binds.append(d.token)
                binds.append(d.environment)
                binds.append(d.apnsID)
                binds.append(payloadOf[i])
                binds.append(d.pushType)
                binds.append(d.priority.map(Int64.init))
                binds.append(d.collapseID)
                binds.append(d.expiration)
                binds.append(d.notBefore)
                let p = (first..<first + 11).map { "$\($0)" }
                values.append("($1, \(p[0]), \(p[1])::bigint, \(p[2]), \(p[3]), \(p[4]), $3::bytea, \(p[5])::bigint, "
                              + "\(p[6]), \(p[7])::integer, \(p[8])::text, \(p[9])::bigint, $2::bigint, \(p[10])::bigint)")
            }
            try await connection.run(PostgresQuery(unsafeSQL: """
                INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                        payload_id, push_type, priority, collapse_id, expiration, created_at,
                                        not_before)
                VALUES \(values.joined(separator: ", "))
                """, binds: binds))
        }
    }

    /// Leaving the outbox is the proof of holding a delivery (see `Finishes`); an
    /// answer already in `results` (a second finish) adds nothing and is not counted
    /// as recorded. Multi-row VALUES: the nullable columns cannot travel in the arrays
    /// postgres-nio encodes.
    func leaveOutboxAndRecord(worker: String, _ outcomes: [DeliveryOutcome],
                              now: Int64) async throws -> (held: [DeliveryOutcome], recorded: Set<Int64>?) {
        var leave = PostgresBindings(capacity: 2)
        leave.append(worker)
        leave.append(outcomes.map(\.deliveryID))
        let held = Finishes.held(outcomes, left: Set(
            try await connection.rows(PostgresQuery(unsafeSQL: Statements.finishLeaveOutboxReturning.postgres, binds: leave))
                .map { try $0.get(0, Int64.self) }))
        var recorded = Set<Int64>(minimumCapacity: held.count)
        for start in stride(from: 0, to: held.count, by: PostgresStore.rowsPerStatement) {
            let end = min(start + PostgresStore.rowsPerStatement, held.count)
            var binds = PostgresBindings(capacity: 1 + (end - start) * 6)
            binds.append(now)
            var values: [String] = []
            for o in held[start..<end] {
                let first = binds.count + 1
                binds.append(o.deliveryID)
                binds.append(Finishes.state(o))
                binds.append(Int64(o.status))
                binds.append(o.reason)
                binds.append(o.timestamp)
                binds.append(Int64(o.attempts))
                values.append("($\(first)::bigint, $\(first + 1)::text, $\(first + 2)::integer, "
                              + "$\(first + 3)::text, $\(first + 4)::bigint, $\(first + 5)::integer)")
            }
            for row in try await connection.rows(PostgresQuery(unsafeSQL: """
                INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
                SELECT f.id, f.state, f.status, f.reason, f.apns_timestamp, f.attempts, $1
                FROM (VALUES \(values.joined(separator: ", "))) AS f (id, state, status, reason, apns_timestamp, attempts)
                ON CONFLICT (delivery_id) DO NOTHING
                RETURNING delivery_id
                """, binds: binds)) {
                recorded.insert(try row.get(0, Int64.self))
            }
        }
        return (held, recorded)
    }
}
