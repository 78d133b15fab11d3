import PostgresNIO

// Coalescing windows and quiet hours' defer on PostgreSQL: the same steps as SQLite's
// `SQLiteStore.applyHolds` (Holds.swift), with the two races SQLite's single writer
// never meets made impossible by locks:
// - two enqueues (on any instances) for one window: each takes the window's advisory
//   lock first, so the second finds the first's window open and joins it, instead of
//   both opening one;
// - an enqueue and a claim of the window's delivery: the enqueue locks the outbox row
//   it joins (`FOR UPDATE`), so the claim skips it until the member is in; a row a
//   claim took first is no longer free when the lock is granted, and the newcomer
//   opens the next window, as on SQLite.

extension PostgresStore {
    /// The enqueue's second step for deliveries with a hold, already inserted (pending)
    /// in this transaction; `payloadOf[i]` is delivery i's payload row. Statements per
    /// delivery: holds touch a few users' devices, never a 100k fan-out.
    static func applyHolds(_ db: PostgresConnection, notificationID: String, _ deliveries: [NewDelivery],
                           payloadOf: [Int64], now: Int64) async throws {
        // Each window's lock, in one order (by key hash) for every enqueue, so that two
        // enqueues with windows in common never wait on each other in a circle.
        let windows = Set(deliveries.compactMap { d in d.hold.map { Self.windowName(d.deviceID, $0) } })
        if !windows.isEmpty {
            try await db.run("""
                SELECT pg_advisory_xact_lock(h)
                FROM (SELECT DISTINCT hashtextextended(w, 0) AS h FROM unnest(\(Array(windows))::text[]) AS u (w) ORDER BY h) s
                """)
        }
        // Closed windows are of no more use (their deliveries live on in the outbox);
        // rows another enqueue is deleting are left to it.
        try await db.run("""
            DELETE FROM holds WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM holds WHERE closes_at <= \(now) FOR UPDATE SKIP LOCKED))
            """)
        guard !windows.isEmpty else { return }
        for (i, d) in deliveries.enumerated() {
            guard let hold = d.hold else { continue }
            guard let id = try await db.rows("SELECT id FROM deliveries WHERE apns_id = \(d.apnsID)").first?
                .get(0, Int64.self)
            else {
                throw StoreError("enqueue: delivery \(d.apnsID) vanished inside its own transaction")
            }
            // Open: its time has not run out and its delivery waits unclaimed.
            let current = try await db.rows("""
                SELECT h.delivery_id FROM holds h JOIN outbox o ON o.delivery_id = h.delivery_id
                WHERE h.device_id = \(d.deviceID) AND h.kind = \(hold.kindName) AND h.key = \(hold.key)
                  AND h.closes_at > \(now) AND o.claimed_by IS NULL
                FOR UPDATE OF o
                """).first?.get(0, Int64.self)
            var newCarrier: Int64 = 0
            for step in HoldsPlan.steps(for: d, id: id, hold: hold, open: current) {
                switch step {
                case .join(let carrier, let until):
                    try await db.run("""
                        UPDATE deliveries SET payload_id = \(payloadOf[i]), push_type = \(d.pushType),
                                              priority = \(d.priority.map(Int64.init))::integer,
                                              expiration = \(d.expiration)::bigint, batched = batched + 1,
                                              not_before = greatest(not_before, coalesce(\(until)::bigint, not_before))
                        WHERE id = \(carrier)
                        """)
                    if let until {
                        try await db.run("""
                            UPDATE outbox SET available_at = greatest(available_at, \(until)) WHERE delivery_id = \(carrier)
                            """)
                    }
                case .openCarrier(let apnsID, let collapseID, let notBefore):
                    newCarrier = try await db.rows("""
                        INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                                payload_id, push_type, priority, collapse_id, expiration, created_at,
                                                not_before, batched)
                        VALUES (\(notificationID), \(d.userID), \(d.deviceID), \(d.token), \(d.environment),
                                \(apnsID), ''::bytea, \(payloadOf[i]), \(d.pushType),
                                \(d.priority.map(Int64.init))::integer, \(collapseID), \(d.expiration)::bigint,
                                \(now), \(notBefore), 1)
                        RETURNING id
                        """)[0].get(0, Int64.self)
                case .keep(let delivery):
                    try await db.run("""
                        INSERT INTO holds (device_id, kind, key, delivery_id, closes_at)
                        VALUES (\(d.deviceID), \(hold.kindName), \(hold.key), \(delivery.row(newCarrier: newCarrier)),
                                \(hold.closesAt))
                        ON CONFLICT (device_id, kind, key) DO UPDATE SET delivery_id = excluded.delivery_id,
                                                                         closes_at = excluded.closes_at
                        """)
                case .carry(let delivery, let by, let state):
                    try await db.run("""
                        UPDATE deliveries SET state = \(state), carried_by = \(by.row(newCarrier: newCarrier)),
                                              finished_at = \(now), not_before = NULL
                        WHERE id = \(delivery.row(newCarrier: newCarrier)) AND state = 'pending'
                        """)
                case .leaveOutbox(let delivery):
                    try await db.run("DELETE FROM outbox WHERE delivery_id = \(delivery)")
                }
            }
        }
    }

    /// The advisory lock's name for a device's window.
    private static func windowName(_ deviceID: Int64, _ hold: Hold) -> String {
        "\(deviceID)/\(hold.kindName)/\(hold.key)"
    }
}
