/// `ChannelStore`'s statements, each engine's spelling side by side where they
/// differ. A channel's key is four arguments: app, environment, entity type, entity
/// (`ChannelKey.arguments`). Text is ordered byte-wise on both engines (COLLATE "C"
/// on PostgreSQL, whatever the database's locale).
enum ChannelStatements {
    /// In this order, read by `ChannelRow.init(_:)`.
    static let channelColumns = "app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at"

    /// The key's channel: 1-4 the key.
    static let channel = Spelling("""
        SELECT \(channelColumns) FROM channels
        WHERE app_type = $1 AND environment = $2 AND entity_type = $3 AND entity_id = $4
        """)

    /// The key's channel if its audience includes the user: 1-4 the key, 5 the
    /// user's company (NULL: none), 6 the user.
    static let visibleChannel = Spelling(
        sqlite: """
            SELECT \(channelColumns) FROM channels
            WHERE app_type = ?1 AND environment = ?2 AND entity_type = ?3 AND entity_id = ?4
              AND (is_public = 1 OR audience_company = ?5
                   OR EXISTS (SELECT 1 FROM channel_users m WHERE m.channel = channels.id AND m.user_id = ?6))
            """,
        postgres: """
            SELECT \(channelColumns) FROM channels
            WHERE app_type = $1 AND environment = $2 AND entity_type = $3 AND entity_id = $4
              AND (is_public OR audience_company = $5::text
                   OR EXISTS (SELECT 1 FROM channel_users m WHERE m.channel = channels.id AND m.user_id = $6))
            """)

    /// An app's channels by entity: 1 the app, 2 the environment and 3 the entity
    /// type (each NULL: any).
    static let channels = Spelling(
        sqlite: """
            SELECT \(channelColumns) FROM channels
            WHERE app_type = ?1 AND coalesce(environment = ?2, 1) AND coalesce(entity_type = ?3, 1)
            ORDER BY entity_type, entity_id, environment
            """,
        postgres: """
            SELECT \(channelColumns) FROM channels
            WHERE app_type = $1 AND ($2::text IS NULL OR environment = $2::text)
              AND ($3::text IS NULL OR entity_type = $3::text)
            ORDER BY entity_type COLLATE "C", entity_id COLLATE "C", environment COLLATE "C"
            """)

    /// A channel, unless its key has one: 1-4 the key, 5 APNs' channel id, 6 the
    /// storage policy, 7 when.
    static let add = Spelling("""
        INSERT INTO channels (app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (app_type, environment, entity_type, entity_id) DO NOTHING
        """)

    /// The key's channel's audience, but its users: 1 public, 2 the company (NULL:
    /// none), 3-6 the key. Its id, when there is one.
    static let setAudience = Spelling("""
        UPDATE channels SET is_public = $1, audience_company = $2
        WHERE app_type = $3 AND environment = $4 AND entity_type = $5 AND entity_id = $6
        RETURNING id
        """)

    /// Every user of channel 1's audience.
    static let clearUsers = Spelling("DELETE FROM channel_users WHERE channel = $1")

    /// Channel 1's audience gets users 2 (a list).
    static let addUsers = Spelling(
        sqlite: "INSERT OR IGNORE INTO channel_users (channel, user_id) SELECT ?1, value FROM json_each(?2)",
        postgres: """
            INSERT INTO channel_users (channel, user_id) SELECT $1, u FROM unnest($2::text[]) AS u
            ON CONFLICT DO NOTHING
            """)

    /// The key's channel if it is still 5 (APNs' channel id); a row if it was.
    static let remove = Spelling("""
        DELETE FROM channels
        WHERE app_type = $1 AND environment = $2 AND entity_type = $3 AND entity_id = $4 AND channel_id = $5
        RETURNING id
        """)

    // MARK: Broadcasts

    /// A pending broadcast: 1 id, 2-5 its channel's key, 6 APNs' channel id, 7 the
    /// payload, 8 priority, 9 expiration, 10 now (created, and due).
    static let enqueue = Spelling("""
        INSERT INTO broadcasts (id, app_type, environment, entity_type, entity_id, channel_id, payload,
                                priority, expiration, created_at, available_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
        """)

    /// What a claim returns, read by `ClaimedBroadcast.init(_:)`: `b` the broadcast,
    /// `c` its channel (LEFT JOIN); attempts as they were before the claim (a lease
    /// changes no count).
    static let claimedColumns = """
        b.id, b.app_type, b.environment, b.entity_type, b.entity_id, b.channel_id, b.payload,
        b.priority, b.expiration, b.attempts, coalesce(c.storage_policy, 0), b.created_at
        """

    /// `b`'s channel.
    static let channelOfBroadcast = """
        LEFT JOIN channels c ON c.app_type = b.app_type AND c.environment = b.environment
                            AND c.entity_type = b.entity_type AND c.entity_id = b.entity_id
        """

    /// SQLite's claim, first step: the oldest due broadcasts whose lease is free or
    /// expired: 1 now, 2 how many.
    static let due = Spelling.only(sqlite: """
        SELECT \(claimedColumns)
        FROM broadcasts b
        \(channelOfBroadcast)
        WHERE b.state = 'pending' AND b.available_at <= ?1 AND (b.lease_until IS NULL OR b.lease_until <= ?1)
        ORDER BY b.available_at, b.created_at
        LIMIT ?2
        """)

    /// SQLite's claim, second step: leased until 1 to worker 2: broadcasts 3 (a list).
    static let lease = Spelling.only(sqlite: """
        UPDATE broadcasts SET lease_until = ?1, claimed_by = ?2
        WHERE id IN (SELECT value FROM json_each(?3))
        """)

    /// PostgreSQL's claim, in one statement as deliveries are claimed: the oldest due
    /// broadcasts whose lease is free or expired, locked (skipping those another
    /// claim holds locked), leased: 1 now, 2 how many, 3 the lease's end, 4 the worker.
    static let claimLocked = Spelling.only(postgres: """
        WITH picked AS (
            SELECT id FROM broadcasts
            WHERE state = 'pending' AND available_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
            ORDER BY available_at, created_at
            LIMIT $2
            FOR UPDATE SKIP LOCKED
        ), leased AS (
            UPDATE broadcasts b SET lease_until = $3, claimed_by = $4
            FROM picked WHERE b.id = picked.id
            RETURNING b.id, b.app_type, b.environment, b.entity_type, b.entity_id, b.channel_id, b.payload,
                      b.priority, b.expiration, b.attempts, b.created_at, b.available_at
        )
        SELECT \(claimedColumns)
        FROM leased b
        \(channelOfBroadcast)
        ORDER BY b.available_at, b.created_at
        """)

    /// The one final entry, if worker 9 still holds broadcast 8: 1 state, 2 status,
    /// 3 reason, 4 request id, 5 unique id, 6 attempts, 7 now. A row if it was written.
    static let finish = Spelling("""
        UPDATE broadcasts SET state = $1, status = $2, reason = $3, request_id = $4, unique_id = $5, attempts = $6,
                              finished_at = $7, lease_until = NULL, claimed_by = NULL
        WHERE id = $8 AND state = 'pending' AND claimed_by = $9
        RETURNING id
        """)

    /// Leases until 1 of the broadcasts 3 (a list) worker 2 still holds.
    static let renew = Spelling(
        sqlite: """
            UPDATE broadcasts SET lease_until = ?1
            WHERE claimed_by = ?2 AND state = 'pending' AND id IN (SELECT value FROM json_each(?3))
            """,
        postgres: """
            UPDATE broadcasts SET lease_until = $1
            WHERE claimed_by = $2 AND state = 'pending' AND id = ANY($3::text[])
            """)

    /// Broadcast 2, if worker 3 holds it, pending again from 1, the attempt counted.
    static let release = Spelling("""
        UPDATE broadcasts SET available_at = $1, lease_until = NULL, claimed_by = NULL, attempts = attempts + 1
        WHERE id = $2 AND state = 'pending' AND claimed_by = $3
        """)

    /// Broadcast 1, read by `BroadcastView.init(_:)`.
    static let broadcast = Spelling("""
        SELECT id, app_type, environment, entity_type, entity_id, channel_id, state, status, reason,
               request_id, unique_id, attempts, created_at, finished_at
        FROM broadcasts WHERE id = $1
        """)

    /// How many broadcasts are not yet final.
    static let pending = Spelling("SELECT count(*) FROM broadcasts WHERE state = 'pending'")
}
