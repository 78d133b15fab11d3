import PostgresNIO

/// The schema on PostgreSQL, as numbered steps (the same steps as SQLite's
/// `Migrations`, so a step n means the same on both). `schema_migrations` lists the
/// steps applied. A step is never edited once released: a change is a new step.
///
/// Each step is one transaction that first takes a transaction-level advisory lock:
/// instances starting at once on an empty database queue there, and each, once it
/// has the lock, reads which steps are applied and finds nothing left to do.
enum PostgresMigrations {
    /// Any constant shared by every instance of this program; "apns" in ASCII.
    static let lockKey: Int64 = 0x6170_6e73

    /// Statements one by one (the extended protocol runs one per query).
    static let steps: [[PostgresQuery]] = [v1, v2, v3, v4, v5, v6]

    /// Applies the steps up to `last` (all of them but in tests of an upgrade).
    static func apply(_ db: PostgresConnection, through last: Int = steps.count) async throws {
        while true {
            let done = try await step(db, through: last)
            if done { return }
        }
    }

    /// Applies the next step, if any; true when there was none.
    private static func step(_ db: PostgresConnection, through last: Int) async throws -> Bool {
        try await db.run("BEGIN")
        do {
            try await db.run("SELECT pg_advisory_xact_lock(\(lockKey))")
            try await db.run("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version    INTEGER PRIMARY KEY,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """)
            let version = try await db.rows("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].get(0, Int.self)
            guard version <= steps.count else {
                throw StoreError("the database is at schema version \(version), newer than this program's \(steps.count)")
            }
            guard version < last else {
                try await db.run("COMMIT")
                return true
            }
            for statement in steps[version] { try await db.run(statement) }
            try await db.run("INSERT INTO schema_migrations (version) VALUES (\(version + 1))")
            try await db.run("COMMIT")
            return false
        } catch {
            _ = try? await db.run("ROLLBACK")
            throw error
        }
    }

    /// Times are milliseconds since 1970 (BIGINT), as on SQLite.
    static let v1: [PostgresQuery] = [
        // One row per (app, token), whoever owns it now: a token re-registered by another
        // user moves to them. Never deleted: logout and dead tokens are soft deletes.
        """
        CREATE TABLE devices (
            id                 BIGSERIAL PRIMARY KEY,
            user_id            TEXT    NOT NULL,
            company_id         TEXT,
            app_type           TEXT    NOT NULL,
            token              TEXT    NOT NULL,
            platform           TEXT    NOT NULL,
            environment        TEXT    NOT NULL,
            device_name        TEXT,
            os_version         TEXT,
            app_version        TEXT,
            is_active          BOOLEAN NOT NULL DEFAULT true,
            deactivated_reason TEXT,
            deactivated_at     BIGINT,
            -- The last (re-)registration: a 410 older than this does not kill the token.
            registered_at      BIGINT  NOT NULL,
            created_at         BIGINT  NOT NULL,
            updated_at         BIGINT  NOT NULL,
            last_used_at       BIGINT,
            UNIQUE (app_type, token)
        )
        """,
        // Fan-out reads active tokens only; partial indexes keep dead tokens out of them.
        "CREATE INDEX devices_by_user ON devices (user_id, app_type) WHERE is_active",
        "CREATE INDEX devices_by_company ON devices (company_id, app_type) WHERE is_active",
        // Saved toggles only; a key never saved is absent (the service's default applies).
        """
        CREATE TABLE preferences (
            user_id    TEXT    NOT NULL,
            app_type   TEXT    NOT NULL,
            key        TEXT    NOT NULL,
            value      BOOLEAN NOT NULL,
            updated_at BIGINT  NOT NULL,
            PRIMARY KEY (user_id, app_type, key)
        )
        """,
        """
        CREATE TABLE notifications (
            id          TEXT   PRIMARY KEY,
            type        TEXT   NOT NULL,
            entity_type TEXT,
            entity_id   TEXT,
            app_type    TEXT   NOT NULL,
            created_at  BIGINT NOT NULL
        )
        """,
        // The delivery log: one row per (notification, device), pending until its one
        // final answer is written over it.
        """
        CREATE TABLE deliveries (
            id                      BIGSERIAL PRIMARY KEY,
            notification_id         TEXT    NOT NULL REFERENCES notifications (id),
            user_id                 TEXT    NOT NULL,
            device_id               BIGINT  NOT NULL,
            token                   TEXT    NOT NULL,
            environment             TEXT    NOT NULL,
            apns_id                 TEXT    NOT NULL UNIQUE,
            payload                 BYTEA   NOT NULL,
            push_type               TEXT    NOT NULL,
            priority                INTEGER,
            collapse_id             TEXT,
            expiration              BIGINT,
            state                   TEXT    NOT NULL DEFAULT 'pending'
                                            CHECK (state IN ('pending', 'delivered', 'failed')),
            status                  INTEGER,
            reason                  TEXT,
            apns_timestamp          BIGINT,
            attempts                INTEGER NOT NULL DEFAULT 0,
            cross_environment_tried BOOLEAN NOT NULL DEFAULT false,
            created_at              BIGINT  NOT NULL,
            finished_at             BIGINT
        )
        """,
        "CREATE INDEX deliveries_by_notification ON deliveries (notification_id)",
        // The claim path, kept small: only unfinished deliveries are here, and a finish
        // deletes the row, so a claim scans a short index however long the log grows.
        // Leases are updates of columns no index holds: with room left in each page
        // (fillfactor) they stay HOT (no index entries), and autovacuum visits the table
        // after a fixed number of dead rows instead of a fraction of a small table.
        """
        CREATE TABLE outbox (
            delivery_id  BIGINT PRIMARY KEY REFERENCES deliveries (id),
            available_at BIGINT NOT NULL,
            lease_until  BIGINT,
            claimed_by   TEXT
        ) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000,
                autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 5000)
        """,
        "CREATE INDEX outbox_by_age ON outbox (available_at, delivery_id)",
    ]

    /// The payload once per notification and badge instead of once per delivery. A
    /// delivery with a `payload_id` has an empty `payload`.
    static let v2: [PostgresQuery] = [
        """
        CREATE TABLE payloads (
            id              BIGSERIAL PRIMARY KEY,
            notification_id TEXT  NOT NULL REFERENCES notifications (id),
            bytes           BYTEA NOT NULL
        )
        """,
        "ALTER TABLE deliveries ADD COLUMN payload_id BIGINT REFERENCES payloads (id)",
    ]

    /// Quiet hours and batching (issue #14), as SQLite's v3 (see `Migrations.v3`).
    /// PostgreSQL changes the columns and the CHECKs in place (SQLite rebuilt the tables).
    /// - Preferences may hold text: `value` the boolean, `text_value` the text, exactly one set.
    /// - A delivery may be held: `not_before` (the outbox's `available_at` holds the same
    ///   instant); two more final states, `batched` and `superseded`, with `carried_by`
    ///   naming the carrier and a carrier's `batched` counting its members.
    /// - `holds`: the open windows, one per device, kind and key.
    /// - The claim's index becomes partial: a claim takes free rows (`claimed_by IS NULL`)
    ///   only by walking `outbox_free`, so the rows workers hold are not in its way;
    ///   expired leases (a dead worker's) have their own small index.
    static let v3: [PostgresQuery] = [
        "ALTER TABLE preferences ALTER COLUMN value DROP NOT NULL",
        "ALTER TABLE preferences ADD COLUMN text_value TEXT",
        """
        ALTER TABLE preferences ADD CONSTRAINT preferences_one_value CHECK ((value IS NULL) <> (text_value IS NULL))
        """,
        "ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check",
        """
        ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
            CHECK (state IN ('pending', 'delivered', 'failed', 'batched', 'superseded'))
        """,
        """
        ALTER TABLE deliveries ADD COLUMN not_before BIGINT,
                               ADD COLUMN carried_by BIGINT REFERENCES deliveries (id),
                               ADD COLUMN batched    INTEGER
        """,
        """
        CREATE TABLE holds (
            device_id   BIGINT NOT NULL,
            kind        TEXT   NOT NULL CHECK (kind IN ('coalesce', 'defer')),
            key         TEXT   NOT NULL,
            delivery_id BIGINT NOT NULL REFERENCES deliveries (id),
            closes_at   BIGINT NOT NULL,
            PRIMARY KEY (device_id, kind, key)
        )
        """,
        "CREATE INDEX holds_by_close ON holds (closes_at)",
        // v1's leases were HOT updates of unindexed columns, but every claim then walked
        // past the rows workers held (thousands, with several instances) to reach free
        // ones. Now a lease moves its row from `outbox_free` to `outbox_leased` (an
        // update with index entries, the price of a claim that reads only what it takes).
        "DROP INDEX outbox_by_age",
        "CREATE INDEX outbox_free ON outbox (available_at, delivery_id) WHERE claimed_by IS NULL",
        "CREATE INDEX outbox_leased ON outbox (lease_until) WHERE claimed_by IS NOT NULL",
    ]

    /// Live Activities and broadcast channels (issue #12), as SQLite's v4 (see `Migrations.v4`).
    static let v4: [PostgresQuery] = [
        """
        CREATE TABLE live_activity_tokens (
            device_id       BIGINT PRIMARY KEY REFERENCES devices (id),
            kind            TEXT   NOT NULL CHECK (kind IN ('update', 'start')),
            activity_id     TEXT,
            attributes_type TEXT   NOT NULL,
            CHECK ((kind = 'update') = (activity_id IS NOT NULL))
        )
        """,
        """
        CREATE INDEX live_activity_tokens_by_activity ON live_activity_tokens (activity_id)
            WHERE activity_id IS NOT NULL
        """,
        """
        CREATE TABLE channels (
            id             BIGSERIAL PRIMARY KEY,
            app_type       TEXT    NOT NULL,
            environment    TEXT    NOT NULL,
            entity_type    TEXT    NOT NULL,
            entity_id      TEXT    NOT NULL,
            channel_id     TEXT    NOT NULL,
            storage_policy INTEGER NOT NULL,
            created_at     BIGINT  NOT NULL,
            UNIQUE (app_type, environment, entity_type, entity_id)
        )
        """,
        // Each send to a channel, pending until its one final entry, with a lease of its own.
        """
        CREATE TABLE broadcasts (
            id             TEXT    PRIMARY KEY,
            app_type       TEXT    NOT NULL,
            environment    TEXT    NOT NULL,
            entity_type    TEXT    NOT NULL,
            entity_id      TEXT    NOT NULL,
            channel_id     TEXT    NOT NULL,
            payload        BYTEA   NOT NULL,
            priority       INTEGER,
            expiration     BIGINT  NOT NULL,
            state          TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
            status         INTEGER,
            reason         TEXT,
            request_id     TEXT,
            unique_id      TEXT,
            attempts       INTEGER NOT NULL DEFAULT 0,
            created_at     BIGINT  NOT NULL,
            finished_at    BIGINT,
            available_at   BIGINT  NOT NULL,
            lease_until    BIGINT,
            claimed_by     TEXT
        )
        """,
        "CREATE INDEX broadcasts_pending ON broadcasts (available_at) WHERE state = 'pending'",
    ]

    /// Retention's indexes (issue #11), as SQLite's v5 (see `Migrations.v5`).
    static let v5: [PostgresQuery] = [
        "CREATE INDEX notifications_by_age ON notifications (created_at)",
        "CREATE INDEX payloads_by_notification ON payloads (notification_id)",
        "CREATE INDEX deliveries_by_carrier ON deliveries (carried_by) WHERE carried_by IS NOT NULL",
        "CREATE INDEX broadcasts_finished ON broadcasts (finished_at) WHERE state <> 'pending'",
    ]

    /// Who may do what with whose tokens and channels, as SQLite's v11 (see
    /// `Migrations.v11`): activities' owners (an existing activity's is the user of
    /// its oldest token row), channels' audiences (none for existing channels), and
    /// the index that prunes deactivated tokens by age.
    static let v6: [PostgresQuery] = [
        """
        CREATE TABLE live_activities (
            app_type    TEXT   NOT NULL,
            activity_id TEXT   NOT NULL,
            user_id     TEXT   NOT NULL,
            created_at  BIGINT NOT NULL,
            PRIMARY KEY (app_type, activity_id)
        )
        """,
        """
        INSERT INTO live_activities (app_type, activity_id, user_id, created_at)
            SELECT DISTINCT ON (d.app_type, l.activity_id) d.app_type, l.activity_id, d.user_id, d.created_at
            FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
            WHERE l.activity_id IS NOT NULL
            ORDER BY d.app_type, l.activity_id, d.id
        """,
        """
        ALTER TABLE channels ADD COLUMN is_public        BOOLEAN NOT NULL DEFAULT false,
                             ADD COLUMN audience_company TEXT
        """,
        """
        CREATE TABLE channel_users (
            channel BIGINT NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
            user_id TEXT   NOT NULL,
            PRIMARY KEY (channel, user_id)
        )
        """,
        "UPDATE devices SET deactivated_at = updated_at WHERE NOT is_active AND deactivated_at IS NULL",
        "CREATE INDEX devices_inactive ON devices (deactivated_at) WHERE NOT is_active",
    ]
}

extension PostgresStore {
    /// On a connection of its own, so that a wrong URL, a refused password or a
    /// server that is down is one line at start-up, not a minute of pool retries.
    public func migrate() async throws(StoreError) {
        try await migrate(through: PostgresMigrations.steps.count)
    }

    /// The schema as of step `last` (tests of an upgrade start from an older one).
    func migrate(through last: Int) async throws(StoreError) {
        let settings = try configuration.connection()
        do {
            let connection = try await PostgresConnection.connect(configuration: settings, id: 0, logger: Self.quiet)
            do {
                try await PostgresMigrations.apply(connection, through: last)
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        } catch {
            throw StoreError(postgres: error, "migrate", configuration)
        }
    }
}
