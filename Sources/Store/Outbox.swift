// The outbox: deliveries waiting for a worker of any instance, once for both engines.
// A row is claimed by setting a lease (lease_until, claimed_by) and leaves the table
// when its delivery is final, so the claim path holds pending and claimed rows only.
//
// "Held" means claimed_by is this worker. An expired lease is still held until
// another worker claims the row: a late finish from the first worker is then the
// truth (the notification was sent), and is recorded rather than sent again.
//
// On PostgreSQL row locks decide every race: a claim skips rows another transaction
// has locked (SKIP LOCKED) and re-checks the lease of a row another claim updated
// meanwhile; finish, renew, retry and release match `claimed_by = worker`, which a
// concurrent claim's commit makes false. On SQLite every write holds the file's one
// write lock (`BEGIN IMMEDIATE`): no other writer, in this process or another, runs
// between two statements of one.

extension StoreEngine {
    public func claim(worker: String, limit: Int, leaseMillis: Int64,
                      now: Int64) async throws(StoreError) -> [ClaimedDelivery] {
        guard limit > 0 else { return [] }
        return try await writing("claim") { c in
            var mapping = ClaimMapping<Connection.Row>()
            switch c.engine {
            case .sqlite:
                // Read, then lease what was read, under the write lock.
                let claimed = try await c.mapRows(OutboxStatements.claimRead, [now, limit]) { try mapping.claimed($0) }
                guard !claimed.isEmpty else { return [] }
                try await c.run(OutboxStatements.claimLease, [now + leaseMillis, worker, claimed.map(\.id)])
                return claimed
            case .postgres:
                // Lease (skipping rows other claims hold locked), then read in a second
                // statement with a snapshot of its own: an enqueue that joined a
                // coalescing window's carrier held the carrier's outbox row locked
                // until it committed, so whatever it wrote (the latest payload, one
                // more member) is visible here; the first statement's snapshot may
                // predate it. The device's state is read here too, as fresh as it gets.
                let leased = try await c.rows(OutboxStatements.claimLeaseLocked, [now, limit, now + leaseMillis, worker])
                    .map { (available: try $0.int64(1), id: try $0.int64(0)) }
                    .sorted { ($0.available, $0.id) < ($1.available, $1.id) }
                guard !leased.isEmpty else { return [] }
                return try await c.mapRows(OutboxStatements.claimReadLeased, [leased.map(\.id)]) { try mapping.claimed($0) }
            }
        }
    }

    public func renew(worker: String, deliveryIDs: [Int64], leaseMillis: Int64,
                      now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await writing("renew leases") { c in
            try await c.run(OutboxStatements.renew, [now + leaseMillis, worker, deliveryIDs])
        }
    }

    /// `attempts` is written as given: the outcome carries the delivery's total (the
    /// caller knows `ClaimedDelivery.attempts` and the engine's count).
    ///
    /// Set-based: the batch leaves the outbox and gets its results in a few
    /// statements (the driver's), one more for the delivered devices; statements per
    /// outcome only for the rare token changes.
    public func finish(worker: String, _ outcomes: [DeliveryOutcome],
                       now: Int64) async throws(StoreError) -> Int {
        guard !outcomes.isEmpty else { return 0 }
        let webhooks = webhookRouting.current
        return try await writing("finish deliveries") { c in
            let (held, recorded) = try await c.leaveOutboxAndRecord(worker: worker, outcomes, now: now)
            let isRecorded: (Int64) -> Bool = recorded.map { set in { set.contains($0) } } ?? { _ in true }
            let effects = Finishes.deviceEffects(held, isRecorded: isRecorded)
            if c.engine == .postgres && !(effects.used.isEmpty && effects.changes.isEmpty) {
                // Workers finishing at once touch devices in overlapping sets: taking the
                // rows' locks in one order (by id) first keeps two finishes from waiting
                // on each other.
                try await c.run(OutboxStatements.lockDevices, [effects.used + effects.changes.map(\.deliveryID)])
            }
            for (deliveryID, change, timestamp) in effects.changes {
                guard let deviceID = try await c.int64(OutboxStatements.deviceOf, [deliveryID]) else { continue }
                try await Self.apply(c, change, to: deviceID, now: now)
                if case .moveEnvironment = change { continue }
                try await Self.recordDeactivation(c, webhooks, deviceID: deviceID, apnsTimestamp: timestamp, now: now)
            }
            let failedIDs = held.filter { !$0.delivered && isRecorded($0.deliveryID) }.map(\.deliveryID)
            try await Self.recordFailedDeliveries(c, webhooks, ids: failedIDs, now: now)
            try await Self.recordCompletionChecks(c, webhooks, ids: held.map(\.deliveryID).filter(isRecorded), now: now)
            if !effects.used.isEmpty {
                try await c.run(OutboxStatements.deviceUse, [now, effects.used])
            }
            return Finishes.ignored(outcomes, recorded: recorded?.count ?? held.count)
        }
    }

    /// Counts the ended claim in `attempts` (see `ClaimedDelivery.attempts`); a retry
    /// from a worker that no longer holds the delivery is ignored. Back in line at its
    /// old place (available_at is kept), free for any worker.
    public func retry(worker: String, deliveryID: Int64, environment: String, now: Int64) async throws(StoreError) {
        try await writing("retry delivery \(deliveryID)") { c in
            guard try await c.row(OutboxStatements.free, [deliveryID, worker]) != nil else { return }
            try await c.run(OutboxStatements.otherEnvironment, [environment, true, deliveryID])
        }
    }

    /// Gives claimed deliveries back unsent: free for any worker at once, no attempt counted.
    public func unclaim(worker: String, deliveryIDs: [Int64]) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await writing("unclaim deliveries") { c in
            try await c.run(OutboxStatements.unclaim, [worker, deliveryIDs])
        }
    }

    /// Pending again from `availableAt`, the attempt counted, the apns-ids kept: for
    /// the rows this worker still holds only. The rows freed are the ones counted: on
    /// PostgreSQL their locks, taken by the first statement, last to the commit.
    public func release(worker: String, deliveryIDs: [Int64], availableAt: Int64,
                        now: Int64) async throws(StoreError) {
        guard !deliveryIDs.isEmpty else { return }
        try await writing("release deliveries") { c in
            let freed = try await c.rows(OutboxStatements.release, [availableAt, worker, deliveryIDs]).map { try $0.int64(0) }
            guard !freed.isEmpty else { return }
            try await c.run(OutboxStatements.countAttempt, [freed])
        }
    }

    public func outboxDepth() async throws(StoreError) -> Int {
        try await reading("count the outbox") { c in Int(try await c.int64(OutboxStatements.depth, []) ?? 0) }
    }

    public func outboxWaiting(now: Int64) async throws(StoreError) -> Int {
        try await reading("count the outbox") { c in Int(try await c.int64(OutboxStatements.waiting, [now]) ?? 0) }
    }

    /// The first row of the (available_at, delivery_id) index: no scan.
    public func outboxOldestDue(now: Int64) async throws(StoreError) -> Int64? {
        try await reading("read the outbox's oldest due delivery") { c in
            try await c.int64(OutboxStatements.oldestDue, [now])
        }
    }

    /// What an answer from APNs says about the token (the service decided which).
    private static func apply(_ c: Connection, _ change: DeliveryOutcome.TokenChange, to deviceID: Int64,
                              now: Int64) async throws {
        switch change {
        case .deactivate(let reason, let registeredBefore):
            // A token registered again after APNs saw it die belongs to a reinstall: keep it.
            try await c.run(OutboxStatements.deactivateIfOlder, [false, reason, now, deviceID, true, registeredBefore])
        case .deactivateNow(let reason):
            try await c.run(OutboxStatements.deactivate, [false, reason, now, deviceID, true])
        case .moveEnvironment(let environment):
            try await c.run(OutboxStatements.moveEnvironment, [environment, now, deviceID])
        }
    }
}

/// The outbox's statements. Booleans are bound (`is_active = $1`), which each engine
/// spells its own way: 0/1 on SQLite.
enum OutboxStatements {
    /// SQLite's claim, its read: the oldest `limit` due rows, 1 now, 2 how many. Due
    /// rows are free ones (the partial index `outbox_free`, in claim order, where
    /// held rows never are) and expired leases (`outbox_leased`: a dead worker's,
    /// few). Held rows (quiet hours, an open window) wait further up `outbox_free`,
    /// at their not_before. The device's state comes with each row. CROSS JOIN keeps
    /// SQLite reading the picked rows first.
    static let claimRead = Spelling.only(sqlite: """
        WITH picked AS (
            SELECT * FROM (SELECT delivery_id, available_at FROM outbox
                           WHERE claimed_by IS NULL AND available_at <= ?1
                           ORDER BY available_at, delivery_id LIMIT ?2)
            UNION ALL
            SELECT * FROM (SELECT delivery_id, available_at FROM outbox
                           WHERE claimed_by IS NOT NULL AND lease_until <= ?1 AND available_at <= ?1
                           ORDER BY available_at, delivery_id LIMIT ?2)
        )
        SELECT \(Statements.claimedColumns.sqlite)
        FROM picked o
        CROSS JOIN deliveries d ON d.id = o.delivery_id
        CROSS JOIN notifications n ON n.id = d.notification_id
        \(Statements.claimedDeviceAndPayload)
        ORDER BY o.available_at, o.delivery_id
        LIMIT ?2
        """)

    /// SQLite's claim, its lease: 1 the lease's end, 2 the worker, 3 the rows read.
    static let claimLease = Spelling.only(sqlite: """
        UPDATE outbox SET lease_until = ?1, claimed_by = ?2 WHERE delivery_id IN (SELECT value FROM json_each(?3))
        """)

    /// PostgreSQL's claim, its lease: 1 now, 2 how many, 3 the lease's end, 4 the
    /// worker; the leased rows' (delivery_id, available_at). The oldest `limit` of the
    /// free rows (`outbox_free`) and the expired leases (`outbox_leased`), as SQLite's
    /// read; rows a CTE locked but the limit left out are free again when the
    /// transaction ends.
    static let claimLeaseLocked = Spelling.only(postgres: """
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
        """)

    /// PostgreSQL's claim, its read: the leased deliveries 1, to be sent, in the order given.
    static let claimReadLeased = Spelling.only(postgres: """
        SELECT \(Statements.claimedColumns.postgres)
        FROM unnest($1::bigint[]) WITH ORDINALITY AS l (id, n)
        JOIN deliveries d ON d.id = l.id
        JOIN notifications n ON n.id = d.notification_id
        \(Statements.claimedDeviceAndPayload)
        ORDER BY l.n
        """)

    /// 1 the lease's end, 2 the worker, 3 the deliveries.
    static let renew = Spelling(
        sqlite: "UPDATE outbox SET lease_until = ?1 WHERE claimed_by = ?2 AND delivery_id IN (SELECT value FROM json_each(?3))",
        postgres: "UPDATE outbox SET lease_until = $1 WHERE claimed_by = $2 AND delivery_id = ANY($3::bigint[])")

    /// PostgreSQL: the devices of deliveries 1, locked in id order.
    static let lockDevices = Spelling.only(postgres: """
        SELECT id FROM devices WHERE id IN (SELECT device_id FROM deliveries WHERE id = ANY($1::bigint[]))
        ORDER BY id FOR UPDATE
        """)

    /// 1 the delivery.
    static let deviceOf = Spelling("SELECT device_id FROM deliveries WHERE id = $1")

    /// The devices of deliveries 2 were used at 1.
    static let deviceUse = Spelling(
        sqlite: """
            INSERT INTO device_use (device_id, last_used_at)
            SELECT device_id, ?1 FROM deliveries WHERE id IN (SELECT value FROM json_each(?2))
            ON CONFLICT (device_id) DO UPDATE SET last_used_at = excluded.last_used_at
            """,
        postgres: """
            INSERT INTO device_use (device_id, last_used_at)
            SELECT DISTINCT device_id, $1::bigint FROM deliveries WHERE id = ANY($2::bigint[])
            ON CONFLICT (device_id) DO UPDATE SET last_used_at = excluded.last_used_at
            """)

    /// Delivery 1 freed if worker 2 holds it; a row when it did.
    static let free = Spelling("""
        UPDATE outbox SET lease_until = NULL, claimed_by = NULL WHERE delivery_id = $1 AND claimed_by = $2
        RETURNING delivery_id
        """)

    /// The BadDeviceToken retry: 1 the other environment, 2 true, 3 the delivery.
    static let otherEnvironment = Spelling("""
        UPDATE deliveries SET environment = $1, cross_environment_tried = $2, attempts = attempts + 1 WHERE id = $3
        """)

    /// 1 the worker, 2 the deliveries.
    static let unclaim = Spelling(
        sqlite: """
            UPDATE outbox SET lease_until = NULL, claimed_by = NULL
            WHERE claimed_by = ?1 AND delivery_id IN (SELECT value FROM json_each(?2))
            """,
        postgres: """
            UPDATE outbox SET lease_until = NULL, claimed_by = NULL
            WHERE claimed_by = $1 AND delivery_id = ANY($2::bigint[])
            """)

    /// Pending again from 1, of worker 2's deliveries 3; those freed.
    static let release = Spelling(
        sqlite: """
            UPDATE outbox SET lease_until = NULL, claimed_by = NULL, available_at = ?1
            WHERE claimed_by = ?2 AND delivery_id IN (SELECT value FROM json_each(?3))
            RETURNING delivery_id
            """,
        postgres: """
            UPDATE outbox SET lease_until = NULL, claimed_by = NULL, available_at = $1
            WHERE claimed_by = $2 AND delivery_id = ANY($3::bigint[])
            RETURNING delivery_id
            """)

    /// 1 the deliveries.
    static let countAttempt = Spelling(
        sqlite: "UPDATE deliveries SET attempts = attempts + 1 WHERE id IN (SELECT value FROM json_each(?1))",
        postgres: "UPDATE deliveries SET attempts = attempts + 1 WHERE id = ANY($1::bigint[])")

    static let depth = Spelling("SELECT count(*) FROM outbox")

    /// 1 now.
    static let waiting = Spelling("SELECT count(*) FROM outbox WHERE available_at > $1")

    /// 1 now.
    static let oldestDue = Spelling("SELECT min(available_at) FROM outbox WHERE available_at <= $1")

    /// 1 false, 2 reason, 3 now, 4 the device, 5 true, 6 registered before.
    static let deactivateIfOlder = Spelling("""
        UPDATE devices SET is_active = $1, deactivated_reason = $2, deactivated_at = $3, updated_at = $3
        WHERE id = $4 AND is_active = $5 AND registered_at < $6
        """)

    /// 1 false, 2 reason, 3 now, 4 the device, 5 true.
    static let deactivate = Spelling("""
        UPDATE devices SET is_active = $1, deactivated_reason = $2, deactivated_at = $3, updated_at = $3
        WHERE id = $4 AND is_active = $5
        """)

    /// 1 the environment, 2 now, 3 the device.
    static let moveEnvironment = Spelling("UPDATE devices SET environment = $1, updated_at = $2 WHERE id = $3")
}
