import PostgresNIO

// The outbox on PostgreSQL: deliveries waiting for a worker of any instance. A row is
// claimed by setting a lease (lease_until, claimed_by) and leaves the table when its
// delivery is final, so the claim path holds pending and claimed rows only. Its two
// partial indexes split those: `outbox_free` (unclaimed, by availability: what a claim
// walks) and `outbox_leased` (claimed, by lease end: where expired leases are found).
//
// "Held" means claimed_by is this worker, as on SQLite. An expired lease is still
// held until another worker claims the row: a late finish is then the truth (the
// notification was sent) and is recorded rather than sent again.
//
// Row locks decide every race: a claim skips rows another transaction has locked
// (SKIP LOCKED), and re-checks the lease of a row another claim updated meanwhile;
// finish, renew, retry and release match `claimed_by = worker`, which a concurrent
// claim's commit makes false.

extension PostgresStore {
    /// The channel enqueue notifies and idle workers LISTEN on.
    static let workChannel = "apns_outbox"

    /// Rows per multi-row INSERT or UPDATE (binds stay far below the protocol's 65,535).
    static let rowsPerStatement = 1_000

    public func unclaim(worker: String, deliveryIDs: [Int64]) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        _ = try await rows("unclaim deliveries", """
            UPDATE outbox SET lease_until = NULL, claimed_by = NULL
            WHERE claimed_by = \(worker) AND delivery_id = ANY(\(deliveryIDs))
            """)
    }

    /// Two statements in one transaction. The first picks the oldest due rows
    /// (skipping rows other claims hold locked) and leases them; in READ COMMITTED, a
    /// row whose lease another claim took after this statement's snapshot is re-checked
    /// against its new version before it is locked, so it is never leased twice.
    ///
    /// The second reads what sending them needs, with a snapshot of its own: an enqueue
    /// that joined a coalescing window's carrier held the carrier's outbox row locked
    /// until it committed, so whatever it wrote (the latest payload, one more member)
    /// is visible here; the first statement's snapshot may predate it. The device's
    /// state is read here too, as fresh as it gets.
    public func claim(worker: String, limit: Int, leaseMillis: Int64,
                      now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await transaction("claim") { db -> [ClaimedDelivery] in
            var binds = PostgresBindings(capacity: 4)
            binds.append(now)
            binds.append(Int64(limit))
            binds.append(now + leaseMillis)
            binds.append(worker)
            // Claim order: by availability, then id.
            let leased = try await db.rows(PostgresQuery(unsafeSQL: Self.claimSQL, binds: binds))
                .map { (available: try $0.get(1, Int64.self), id: try $0.get(0, Int64.self)) }
                .sorted { ($0.available, $0.id) < ($1.available, $1.id) }
            guard !leased.isEmpty else { return [] }
            return try await Self.claimedDeliveries(db, ids: leased.map(\.id))
        }
    }

    /// The leased deliveries `ids`, read to be sent, in the order given.
    static func claimedDeliveries(_ db: PostgresConnection, ids: [Int64]) async throws -> [ClaimedDelivery] {
        let found = try await db.rows("""
            SELECT \(unescaped: Statements.claimedColumns.postgres)
            FROM unnest(\(ids)::bigint[]) WITH ORDINALITY AS l (id, n)
            JOIN deliveries d ON d.id = l.id
            JOIN notifications n ON n.id = d.notification_id
            LEFT JOIN devices v ON v.id = d.device_id
            LEFT JOIN payloads p ON p.id = d.payload_id
            ORDER BY l.n
            """)
        return try claimedDeliveries(found)
    }

    /// Rows of `Statements.claimedColumns` as deliveries to send.
    static func claimedDeliveries(_ found: [PostgresRandomAccessRow]) throws -> [ClaimedDelivery] {
        var mapping = ClaimMapping<PostgresRandomAccessRow>()
        return try found.map { try mapping.claimed($0) }
    }

    /// The lease: $1 now, $2 limit, $3 the lease's end, $4 the worker; returns the
    /// leased rows' (delivery_id, available_at).
    ///
    /// Due rows are free ones (the partial index `outbox_free`, in claim order, where
    /// held rows never are) and expired leases (`outbox_leased`: a dead worker's, few);
    /// the oldest `limit` of both, as SQLite's single index gives them. Rows a CTE
    /// locked but the limit left out are free again when the transaction ends.
    static let claimSQL = """
        WITH free AS (
            SELECT delivery_id, available_at FROM outbox
            WHERE claimed_by IS NULL AND available_at <= $1
            ORDER BY available_at, delivery_id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        ), expired AS (
            SELECT delivery_id, available_at FROM outbox
            WHERE claimed_by IS NOT NULL AND lease_until <= $1 AND available_at <= $1
            ORDER BY available_at, delivery_id
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        ), picked AS (
            SELECT delivery_id, available_at FROM free
            UNION ALL
            SELECT delivery_id, available_at FROM expired
            ORDER BY available_at, delivery_id
            LIMIT $2
        )
        -- = ANY(ARRAY(…)): probes of the primary key, where a join may hash the whole outbox.
        UPDATE outbox SET lease_until = $3, claimed_by = $4
        WHERE delivery_id = ANY(ARRAY(SELECT delivery_id FROM picked))
        RETURNING delivery_id, available_at
        """

    public func renew(worker: String, deliveryIDs: [Int64], leaseMillis: Int64,
                      now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        _ = try await rows("renew leases", """
            UPDATE outbox SET lease_until = \(now + leaseMillis)
            WHERE claimed_by = \(worker) AND delivery_id = ANY(\(deliveryIDs))
            """)
    }

    /// `attempts` is written as given: the outcome carries the delivery's total.
    public func finish(worker: String, _ outcomes: [DeliveryOutcome],
                       now: Int64) async throws(StoreError) -> Int {
        guard !outcomes.isEmpty else { return 0 }
        let webhooks = webhookRouting.current
        return try await transaction("finish deliveries") { db in
            // Leaving the outbox is the proof of holding it (see `Finishes`).
            var leave = PostgresBindings(capacity: 2)
            leave.append(worker)
            leave.append(outcomes.map(\.deliveryID))
            let held = Finishes.held(outcomes, left: Set(
                try await db.rows(PostgresQuery(unsafeSQL: Statements.finishLeaveOutboxReturning.postgres, binds: leave))
                    .map { try $0.get(0, Int64.self) }))

            var deviceOf: [Int64: Int64] = [:]
            deviceOf.reserveCapacity(held.count)
            for start in stride(from: 0, to: held.count, by: Self.rowsPerStatement) {
                let end = min(start + Self.rowsPerStatement, held.count)
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
                // The answer is appended to `results` (see `Schema`); the log row is
                // not rewritten. An answer already there (a second finish) adds nothing.
                for row in try await db.rows(PostgresQuery(unsafeSQL: """
                    WITH recorded AS (
                        INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
                        SELECT f.id, f.state, f.status, f.reason, f.apns_timestamp, f.attempts, $1
                        FROM (VALUES \(values.joined(separator: ", "))) AS f (id, state, status, reason, apns_timestamp, attempts)
                        ON CONFLICT (delivery_id) DO NOTHING
                        RETURNING delivery_id
                    )
                    SELECT d.id, d.device_id FROM recorded r JOIN deliveries d ON d.id = r.delivery_id
                    """, binds: binds)) {
                    deviceOf[try row.get(0, Int64.self)] = try row.get(1, Int64.self)
                }
            }

            let effects = Finishes.deviceEffects(held, isRecorded: { deviceOf[$0] != nil })
            let used = effects.used.map { deviceOf[$0]! }
            let changes = effects.changes.map { (device: deviceOf[$0.deliveryID]!, change: $0.change, timestamp: $0.timestamp) }
            // Workers finishing at once touch devices in overlapping sets: taking the
            // rows' locks in one order (by id) first keeps two finishes from waiting
            // on each other.
            let touched = Set(used + changes.map(\.device)).sorted()
            if !touched.isEmpty {
                try await db.run("SELECT id FROM devices WHERE id = ANY(\(touched)) ORDER BY id FOR UPDATE")
            }
            for (deviceID, change, timestamp) in changes {
                try await Self.apply(change, to: deviceID, now: now, db)
                if case .moveEnvironment = change { continue }
                try await Self.recordDeactivation(db, webhooks, deviceID: deviceID, apnsTimestamp: timestamp, now: now)
            }
            let failedIDs = held.filter { !$0.delivered && deviceOf[$0.deliveryID] != nil }.map(\.deliveryID)
            try await Self.recordFailedDeliveries(db, webhooks, ids: failedIDs, now: now)
            try await Self.recordCompletionChecks(db, webhooks, ids: Array(deviceOf.keys), now: now)
            if !used.isEmpty {
                // Under the devices' locks taken above, so finishes never wait on each other here.
                try await db.run("""
                    INSERT INTO device_use (device_id, last_used_at)
                    SELECT DISTINCT unnest(\(used)::bigint[]), \(now)::bigint
                    ON CONFLICT (device_id) DO UPDATE SET last_used_at = excluded.last_used_at
                    """)
            }
            return Finishes.ignored(outcomes, recorded: deviceOf.count)
        }
    }

    /// Counts the ended claim in `attempts`; a retry from a worker that no longer
    /// holds the delivery is ignored. Back in line at its old place, free for any worker.
    public func retry(worker: String, deliveryID: Int64, environment: String, now: Int64) async throws(StoreError) {
        _ = try await rows("retry delivery \(deliveryID)", """
            WITH freed AS (
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL
                WHERE delivery_id = \(deliveryID) AND claimed_by = \(worker)
                RETURNING delivery_id
            )
            UPDATE deliveries SET environment = \(environment), cross_environment_tried = true, attempts = attempts + 1
            WHERE id IN (SELECT delivery_id FROM freed)
            """)
    }

    /// Pending again from `availableAt`, the attempt counted, the apns-ids kept: for
    /// the rows this worker still holds only.
    public func release(worker: String, deliveryIDs: [Int64], availableAt: Int64,
                        now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        _ = try await rows("release deliveries", """
            WITH freed AS (
                UPDATE outbox SET lease_until = NULL, claimed_by = NULL, available_at = \(availableAt)
                WHERE claimed_by = \(worker) AND delivery_id = ANY(\(deliveryIDs))
                RETURNING delivery_id
            )
            UPDATE deliveries SET attempts = attempts + 1 WHERE id IN (SELECT delivery_id FROM freed)
            """)
    }

    public func outboxDepth() async throws(StoreError) -> Int {
        do {
            return try await rows("count the outbox", "SELECT count(*) FROM outbox")[0].get(0, Int.self)
        } catch {
            throw StoreError(postgres: error, "count the outbox", configuration)
        }
    }

    public func outboxWaiting(now: Int64) async throws(StoreError) -> Int {
        do {
            return try await rows("count the outbox", "SELECT count(*) FROM outbox WHERE available_at > \(now)")[0]
                .get(0, Int.self)
        } catch {
            throw StoreError(postgres: error, "count the outbox", configuration)
        }
    }

    public func outboxOldestDue(now: Int64) async throws(StoreError) -> Int64? {
        do {
            return try await rows("read the outbox's oldest due delivery",
                                  "SELECT min(available_at) FROM outbox WHERE available_at <= \(now)")[0]
                .get(0, Int64?.self)
        } catch {
            throw StoreError(postgres: error, "read the outbox's oldest due delivery", configuration)
        }
    }

    /// What an answer from APNs says about the token (the service decided which).
    private static func apply(_ change: DeliveryOutcome.TokenChange, to deviceID: Int64, now: Int64,
                              _ db: PostgresConnection) async throws {
        switch change {
        case .deactivate(let reason, let registeredBefore):
            // A token registered again after APNs saw it die belongs to a reinstall: keep it.
            try await db.run("""
                UPDATE devices SET is_active = false, deactivated_reason = \(reason), deactivated_at = \(now),
                                   updated_at = \(now)
                WHERE id = \(deviceID) AND is_active AND registered_at < \(registeredBefore)
                """)
        case .deactivateNow(let reason):
            try await db.run("""
                UPDATE devices SET is_active = false, deactivated_reason = \(reason), deactivated_at = \(now),
                                   updated_at = \(now)
                WHERE id = \(deviceID) AND is_active
                """)
        case .moveEnvironment(let environment):
            try await db.run("UPDATE devices SET environment = \(environment), updated_at = \(now) WHERE id = \(deviceID)")
        }
    }
}
