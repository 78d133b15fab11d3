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
}
