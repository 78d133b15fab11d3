/// One statement (or part of one) as each engine spells it, side by side under one
/// name: what the policy beside it reads or writes is the same on both, and a
/// change to one spelling is seen next to the other's.
struct Spelling: Sendable {
    let sqlite: String
    let postgres: String

    init(sqlite: String, postgres: String) {
        self.sqlite = sqlite
        self.postgres = postgres
    }

    /// A statement both engines spell alike, written with PostgreSQL's `$1`, `$2`…
    /// (SQLite's `?1`, `?2`… are made from them): no casts, no engine's own
    /// functions, so what is written once is the same statement on both.
    init(_ both: String) {
        postgres = both
        var sqlite = ""
        var rest = Substring(both)
        while let dollar = rest.firstIndex(of: "$") {
            sqlite += rest[..<dollar]
            let after = rest.index(after: dollar)
            sqlite += after < rest.endIndex && rest[after].isNumber ? "?" : "$"
            rest = rest[after...]
        }
        self.sqlite = sqlite + rest
    }

    /// A statement of one engine's plan only (the policy branches on `Engine`): the
    /// other's text is no SQL, so that running it there fails at once.
    static func only(sqlite: String) -> Spelling { Spelling(sqlite: sqlite, postgres: "not PostgreSQL's plan") }
    static func only(postgres: String) -> Spelling { Spelling(sqlite: "not SQLite's plan", postgres: postgres) }
}

enum Statements {
    /// What sending a claimed delivery needs (read by `ClaimMapping`, in this order),
    /// and whether its device is still an active token of the delivery's user, app
    /// and kind (see `ClaimedDelivery.deviceActive`). `d` is the delivery, `n` its
    /// notification, `v` its device (LEFT JOIN), `p` its payload (LEFT JOIN).
    static let claimedColumns = Spelling(
        sqlite: """
            d.id, d.notification_id, d.user_id, d.device_id, d.token, d.environment, d.apns_id,
            coalesce(p.bytes, d.payload), d.push_type, d.priority, d.collapse_id, d.expiration,
            d.attempts, d.cross_environment_tried, n.app_type,
            coalesce(v.is_active = 1 AND v.user_id = d.user_id AND v.app_type = n.app_type
                     AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                     0),
            coalesce(d.batched, 0)
            """,
        postgres: """
            d.id, d.notification_id, d.user_id, d.device_id, d.token, d.environment, d.apns_id,
            coalesce(p.bytes, d.payload), d.push_type, d.priority, d.collapse_id, d.expiration,
            d.attempts, d.cross_environment_tried, n.app_type,
            coalesce(v.is_active AND v.user_id = d.user_id AND v.app_type = n.app_type
                     AND v.platform = (CASE d.push_type WHEN 'liveactivity' THEN 'liveactivity' ELSE 'ios' END),
                     false),
            coalesce(d.batched, 0)
            """)

    /// The joins `claimedColumns` reads the device and the payload through (`d` the
    /// delivery), after the statement's own way to `d` and `n`.
    static let claimedDeviceAndPayload = "LEFT JOIN devices v ON v.id = d.device_id\n"
        + "LEFT JOIN payloads p ON p.id = d.payload_id"

    /// A finish's first step (see `Finishes`): the batch's rows this worker still
    /// holds leave the outbox; 1 the worker, 2 the delivery ids.
    static let finishLeaveOutbox = Spelling(
        sqlite: "DELETE FROM outbox WHERE claimed_by = ?1 AND delivery_id IN (SELECT value FROM json_each(?2))",
        postgres: "DELETE FROM outbox WHERE claimed_by = $1 AND delivery_id = ANY($2::bigint[])")

    /// The same, returning the ids that left.
    static let finishLeaveOutboxReturning = Spelling(
        sqlite: finishLeaveOutbox.sqlite + "\nRETURNING delivery_id",
        postgres: finishLeaveOutbox.postgres + "\nRETURNING delivery_id")

    /// A cancel's first step (`CancelPlan`): of the notification's deliveries and the
    /// carriers of its batched members, the outbox rows no worker holds; ?1/$1 the
    /// notification. PostgreSQL locks them, so that a claim (SKIP LOCKED) passes them
    /// by until the cancel commits; a row a claim took first is re-checked against
    /// its new version and left out. SQLite's one writer needs no lock.
    static let cancelFree = Spelling(
        sqlite: """
            SELECT o.delivery_id FROM outbox o
            WHERE o.claimed_by IS NULL AND o.delivery_id IN (
                SELECT id FROM deliveries WHERE notification_id = ?1
                UNION
                SELECT carried_by FROM deliveries WHERE notification_id = ?1 AND state = 'batched')
            ORDER BY o.delivery_id
            """,
        postgres: """
            SELECT o.delivery_id FROM outbox o
            WHERE o.claimed_by IS NULL AND o.delivery_id IN (
                SELECT id FROM deliveries WHERE notification_id = $1
                UNION
                SELECT carried_by FROM deliveries WHERE notification_id = $1 AND state = 'batched')
            ORDER BY o.delivery_id
            FOR UPDATE OF o
            """)

    /// A cancel's facts (read by `CancelFact`, in this order): the notification's
    /// deliveries, the carriers of its batched members, and the members of the free
    /// carriers; ?1/$1 the notification, ?2/$2 the free rows' ids.
    static let cancelFacts = Spelling(
        sqlite: """
            SELECT d.id, d.notification_id, d.state, d.carried_by, coalesce(d.batched, 0),
                   EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id),
                   EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
            FROM deliveries d
            WHERE d.id IN (
                SELECT id FROM deliveries WHERE notification_id = ?1
                UNION
                SELECT carried_by FROM deliveries WHERE notification_id = ?1 AND state = 'batched'
                UNION
                SELECT id FROM deliveries WHERE state = 'batched' AND carried_by IN (SELECT value FROM json_each(?2)))
            ORDER BY d.id
            """,
        postgres: """
            SELECT d.id, d.notification_id, d.state, d.carried_by, coalesce(d.batched, 0),
                   EXISTS (SELECT 1 FROM outbox o WHERE o.delivery_id = d.id),
                   EXISTS (SELECT 1 FROM results r WHERE r.delivery_id = d.id)
            FROM deliveries d
            WHERE d.id IN (
                SELECT id FROM deliveries WHERE notification_id = $1
                UNION
                SELECT carried_by FROM deliveries WHERE notification_id = $1 AND state = 'batched'
                UNION
                SELECT id FROM deliveries WHERE state = 'batched' AND carried_by = ANY($2::bigint[]))
            ORDER BY d.id
            """)

    /// `CancelPlan.cancel`: ?1/$1 now, ?2/$2 the ids. A cancelled member no longer
    /// names a carrier: the carrier's send is not its own any more.
    static let cancelDeliveries = Spelling(
        sqlite: """
            UPDATE deliveries SET state = 'cancelled', finished_at = ?1, carried_by = NULL
            WHERE id IN (SELECT value FROM json_each(?2))
            """,
        postgres: """
            UPDATE deliveries SET state = 'cancelled', finished_at = $1, carried_by = NULL
            WHERE id = ANY($2::bigint[])
            """)

    /// `CancelPlan.leave`: ?1/$1 the ids.
    static let cancelLeaveOutbox = Spelling(
        sqlite: "DELETE FROM outbox WHERE delivery_id IN (SELECT value FROM json_each(?1))",
        postgres: "DELETE FROM outbox WHERE delivery_id = ANY($1::bigint[])")

    /// `CancelPlan.Recarry`: ?1/$1 the carrier, ?2/$2 the member it takes after,
    /// ?3/$3 how many members it carries now.
    static let recarry = Spelling(
        sqlite: """
            UPDATE deliveries
            SET (notification_id, payload_id, push_type, priority, expiration) =
                (SELECT notification_id, payload_id, push_type, priority, expiration FROM deliveries WHERE id = ?2),
                batched = ?3
            WHERE id = ?1
            """,
        postgres: """
            UPDATE deliveries
            SET (notification_id, payload_id, push_type, priority, expiration) =
                (SELECT notification_id, payload_id, push_type, priority, expiration FROM deliveries WHERE id = $2),
                batched = $3::integer
            WHERE id = $1
            """)
}
