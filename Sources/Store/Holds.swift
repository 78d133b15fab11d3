/// Coalescing windows and quiet hours' defer: the enqueue's second step for
/// deliveries with a hold, already inserted (pending) in this transaction
/// (`HoldsPlan`'s steps). Statements per delivery: holds touch a few users' devices
/// per notification, never a 100k fan-out (which has no hold and never comes here).
///
/// SQLite's single writer keeps a window found open until the commit. PostgreSQL
/// makes the two races that writer never meets impossible with locks:
/// - two enqueues (on any instances) for one window: each takes the window's advisory
///   lock first, so the second finds the first's window open and joins it, instead of
///   both opening one;
/// - an enqueue and a claim of the window's delivery: the enqueue locks the outbox row
///   it joins (`FOR UPDATE`), so the claim skips it until the member is in; a row a
///   claim took first is no longer free when the lock is granted, and the newcomer
///   opens the next window, as on SQLite.
extension StoreEngine {
    static func applyHolds(_ c: Connection, notificationID: String, _ deliveries: [NewDelivery],
                           payloadOf: [Int64], now: Int64) async throws {
        let windows = Set(deliveries.compactMap { d in d.hold.map { windowName(d.deviceID, $0) } })
        if c.engine == .postgres && !windows.isEmpty {
            try await c.run(HoldStatements.lockWindows, [StoreValue.list(Array(windows))])
        }
        // Closed windows are of no more use (their deliveries live on in the outbox).
        try await c.run(HoldStatements.deleteClosed, [now])
        for (i, d) in deliveries.enumerated() {
            guard let hold = d.hold else { continue }
            guard let id = try await c.int64(HoldStatements.deliveryID, [d.apnsID]) else {
                throw StoreError("enqueue: delivery \(d.apnsID) vanished inside its own transaction")
            }
            let open = try await c.int64(HoldStatements.openWindow, [d.deviceID, hold.kindName, hold.key, now])
            var newCarrier: Int64 = 0
            for step in HoldsPlan.steps(for: d, id: id, hold: hold, open: open) {
                switch step {
                case .join(let carrier, let until):
                    try await c.run(HoldStatements.join, [payloadOf[i], d.pushType, d.priority.map(Int64.init),
                                                          d.expiration, until, carrier])
                    if let until { try await c.run(HoldStatements.joinOutbox, [until, carrier]) }
                case .openCarrier(let apnsID, let collapseID, let notBefore):
                    newCarrier = try await c.int64(HoldStatements.openCarrier, [
                        notificationID, d.userID, d.deviceID, d.token, d.environment, apnsID, payloadOf[i], d.pushType,
                        d.priority.map(Int64.init), collapseID, d.expiration, now, notBefore]) ?? 0
                case .keep(let delivery):
                    try await c.run(HoldStatements.keep, [d.deviceID, hold.kindName, hold.key,
                                                          delivery.row(newCarrier: newCarrier), hold.closesAt])
                case .carry(let delivery, let by, let state):
                    try await c.run(HoldStatements.carry, [state, by.row(newCarrier: newCarrier), now,
                                                           delivery.row(newCarrier: newCarrier)])
                case .leaveOutbox(let delivery):
                    try await c.run(HoldStatements.leaveOutbox, [delivery])
                }
            }
        }
    }

    /// The advisory lock's name for a device's window.
    private static func windowName(_ deviceID: Int64, _ hold: Hold) -> String {
        "\(deviceID)/\(hold.kindName)/\(hold.key)"
    }
}

enum HoldStatements {
    /// PostgreSQL only: each window's lock, 1 their names, in one order (by key hash)
    /// for every enqueue, so that two enqueues with windows in common never wait on
    /// each other in a circle.
    static let lockWindows = Spelling.only(postgres: """
        SELECT pg_advisory_xact_lock(h)
        FROM (SELECT DISTINCT hashtextextended(w, 0) AS h FROM unnest($1::text[]) AS u (w) ORDER BY h) s
        """)

    /// Windows closed by 1 now. PostgreSQL leaves rows another enqueue is deleting to it.
    static let deleteClosed = Spelling(
        sqlite: "DELETE FROM holds WHERE closes_at <= ?1",
        postgres: """
            DELETE FROM holds WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM holds WHERE closes_at <= $1 FOR UPDATE SKIP LOCKED))
            """)

    /// 1 the apns-id.
    static let deliveryID = Spelling("SELECT id FROM deliveries WHERE apns_id = $1")

    /// The device's window for the key, if open: its time has not run out and its
    /// delivery waits unclaimed (locked on PostgreSQL). 1 device, 2 kind, 3 key, 4 now.
    static let openWindow: Spelling = {
        let open = """
            SELECT h.delivery_id FROM holds h JOIN outbox o ON o.delivery_id = h.delivery_id
            WHERE h.device_id = $1 AND h.kind = $2 AND h.key = $3 AND h.closes_at > $4 AND o.claimed_by IS NULL
            """
        return Spelling(sqlite: Spelling(open).sqlite, postgres: open + "\nFOR UPDATE OF o")
    }()

    /// The carrier takes the newcomer's content: 1 payload, 2 push type, 3 priority,
    /// 4 expiration, 5 the window's end (NULL: unchanged), 6 the carrier.
    static let join = Spelling(
        sqlite: """
            UPDATE deliveries SET payload_id = ?1, push_type = ?2, priority = ?3, expiration = ?4,
                                  batched = batched + 1, not_before = max(not_before, coalesce(?5, not_before))
            WHERE id = ?6
            """,
        postgres: """
            UPDATE deliveries SET payload_id = $1, push_type = $2, priority = $3::integer, expiration = $4::bigint,
                                  batched = batched + 1, not_before = greatest(not_before, coalesce($5::bigint, not_before))
            WHERE id = $6
            """)

    /// 1 the window's end, 2 the carrier.
    static let joinOutbox = Spelling(
        sqlite: "UPDATE outbox SET available_at = max(available_at, ?1) WHERE delivery_id = ?2",
        postgres: "UPDATE outbox SET available_at = greatest(available_at, $1) WHERE delivery_id = $2")

    /// A new carrier for a window; its id. 1 notification, 2 user, 3 device, 4 token,
    /// 5 environment, 6 apns-id, 7 payload, 8 push type, 9 priority, 10 collapse id,
    /// 11 expiration, 12 now, 13 not before.
    static let openCarrier = Spelling(
        sqlite: """
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    payload_id, push_type, priority, collapse_id, expiration, created_at,
                                    not_before, batched)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, x'', ?7, ?8, ?9, ?10, ?11, ?12, ?13, 1)
            RETURNING id
            """,
        postgres: """
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    payload_id, push_type, priority, collapse_id, expiration, created_at,
                                    not_before, batched)
            VALUES ($1, $2, $3, $4, $5, $6, ''::bytea, $7, $8, $9::integer, $10, $11::bigint, $12, $13, 1)
            RETURNING id
            """)

    /// The window's delivery now: 1 device, 2 kind, 3 key, 4 delivery, 5 its end.
    static let keep = Spelling(
        sqlite: """
            INSERT OR REPLACE INTO holds (device_id, kind, key, delivery_id, closes_at) VALUES (?1, ?2, ?3, ?4, ?5)
            """,
        postgres: """
            INSERT INTO holds (device_id, kind, key, delivery_id, closes_at) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (device_id, kind, key) DO UPDATE SET delivery_id = excluded.delivery_id,
                                                             closes_at = excluded.closes_at
            """)

    /// A member settled by its carrier: 1 state, 2 carrier, 3 now, 4 the member.
    static let carry = Spelling("""
        UPDATE deliveries SET state = $1, carried_by = $2, finished_at = $3, not_before = NULL
        WHERE id = $4 AND state = 'pending'
        """)

    /// 1 the delivery.
    static let leaveOutbox = Spelling("DELETE FROM outbox WHERE delivery_id = $1")
}
