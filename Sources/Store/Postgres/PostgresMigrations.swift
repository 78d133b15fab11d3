import PostgresNIO

/// The schema's PostgreSQL spelling, step by step (the list and what each step means
/// is `Schema`). `schema_migrations` lists the steps applied, by number and name.
///
/// Each step is one transaction that first takes a transaction-level advisory lock:
/// instances starting at once on an empty database queue there, and each, once it
/// has the lock, reads which steps are applied and finds nothing left to do.
enum PostgresMigrations {
    /// Any constant shared by every instance of this program; "apns" in ASCII.
    static let lockKey: Int64 = 0x6170_6e73

    static var steps: [SchemaStep] { Schema.steps }

    /// Applies the steps up to `last` (all of them but in tests of an upgrade).
    static func apply(_ db: PostgresConnection, through last: Int = Schema.steps.count) async throws {
        while true {
            let done = try await step(db, through: last)
            if done { return }
        }
    }

    /// Applies the next missing step, if any; true when there was none.
    private static func step(_ db: PostgresConnection, through last: Int) async throws -> Bool {
        try await db.run("BEGIN")
        do {
            try await db.run("SELECT pg_advisory_xact_lock(\(lockKey))")
            try await renumber(db)
            let applied = Set(try await db.rows("SELECT version FROM schema_migrations").map { try $0.get(0, Int.self) })
            let newest = applied.max() ?? 0
            guard newest <= steps.count else {
                throw StoreError("the database is at schema version \(newest), newer than this program's \(steps.count)")
            }
            // In order; a database renumbered from before the one history may miss
            // steps below its newest (see `Schema.postgresNumberingBefore12`).
            guard let next = steps.prefix(last).first(where: { !applied.contains($0.number) }) else {
                try await db.run("COMMIT")
                return true
            }
            for statement in next.postgres { try await db.run(statement) }
            try await db.run("INSERT INTO schema_migrations (version, name) VALUES (\(next.number), \(next.name))")
            try await db.run("COMMIT")
            return false
        } catch {
            _ = try? await db.run("ROLLBACK")
            throw error
        }
    }

    /// Makes `schema_migrations` the one history's list: created on an empty
    /// database; on one from before, whose rows numbered PostgreSQL's own steps
    /// (and which has no `name` column), those rows become the steps here it has.
    private static func renumber(_ db: PostgresConnection) async throws {
        let columns = try await db.rows("""
            SELECT count(*) FILTER (WHERE column_name = 'name'), count(*) FROM information_schema.columns
            WHERE table_schema = current_schema() AND table_name = 'schema_migrations'
            """)[0]
        let (named, any) = (try columns.get(0, Int.self), try columns.get(1, Int.self))
        if any == 0 {
            try await db.run("""
                CREATE TABLE schema_migrations (
                    version    INTEGER PRIMARY KEY,
                    name       TEXT NOT NULL,
                    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
                )
                """)
            return
        }
        guard named == 0 else { return }
        let old = try await db.rows("SELECT coalesce(max(version), 0) FROM schema_migrations")[0].get(0, Int.self)
        guard old == 0 || Schema.postgresNumberingBefore12[old] != nil else {
            throw StoreError("the database is at schema version \(old), newer than this program's \(steps.count)")
        }
        try await db.run("DELETE FROM schema_migrations")
        try await db.run("ALTER TABLE schema_migrations ADD COLUMN name TEXT NOT NULL")
        for number in Schema.postgresNumberingBefore12[old] ?? [] {
            try await db.run("""
                INSERT INTO schema_migrations (version, name) VALUES (\(number), \(steps[number - 1].name))
                """)
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
    ]

    /// The claim's index becomes partial, as SQLite's v6.
    static let v6: [PostgresQuery] = [
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

    /// A company's devices a user at a time, newest first, as SQLite's v7.
    static let v7: [PostgresQuery] = [
        "DROP INDEX devices_by_company",
        """
        CREATE INDEX devices_by_company ON devices (company_id, app_type, user_id, registered_at DESC, id DESC)
            WHERE is_active
        """,
    ]

    /// APNs' answers in a narrow table of their own, as SQLite's v8: a finish
    /// appends here and never rewrites the wide log row, so `deliveries` rows are
    /// written once (no dead versions for the claim's join to step over).
    static let v8: [PostgresQuery] = [
        """
        CREATE TABLE results (
            delivery_id    BIGINT  PRIMARY KEY,
            state          TEXT    NOT NULL CHECK (state IN ('delivered', 'failed')),
            status         INTEGER NOT NULL,
            reason         TEXT,
            apns_timestamp BIGINT,
            attempts       INTEGER NOT NULL,
            finished_at    BIGINT  NOT NULL
        )
        """,
    ]

    /// When a device was last delivered to, as SQLite's v9; existing values move here.
    static let v9: [PostgresQuery] = [
        """
        CREATE TABLE device_use (
            device_id    BIGINT PRIMARY KEY,
            last_used_at BIGINT NOT NULL
        )
        """,
        """
        INSERT INTO device_use (device_id, last_used_at)
            SELECT id, last_used_at FROM devices WHERE last_used_at IS NOT NULL
        """,
    ]

    /// A count of changes to what a fan-out read of its devices, as SQLite's v10,
    /// kept by triggers.
    static let v10: [PostgresQuery] = [
        """
        CREATE TABLE device_changes (
            id         INTEGER PRIMARY KEY CHECK (id = 1),
            generation BIGINT  NOT NULL
        )
        """,
        "INSERT INTO device_changes (id, generation) VALUES (1, 0)",
        """
        CREATE FUNCTION device_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE device_changes SET generation = generation + 1;
            RETURN NULL;
        END
        $$
        """,
        """
        CREATE TRIGGER device_changed AFTER UPDATE OF is_active, user_id, app_type, platform ON devices
            FOR EACH ROW
            WHEN (OLD.is_active IS DISTINCT FROM NEW.is_active OR OLD.user_id IS DISTINCT FROM NEW.user_id
                  OR OLD.app_type IS DISTINCT FROM NEW.app_type OR OLD.platform IS DISTINCT FROM NEW.platform)
            EXECUTE FUNCTION device_changed()
        """,
        "CREATE TRIGGER device_deleted AFTER DELETE ON devices FOR EACH ROW EXECUTE FUNCTION device_changed()",
    ]

    /// Who may do what with whose tokens and channels, as SQLite's v11 (see
    /// `Migrations.v11`): activities' owners (an existing activity's is the user of
    /// its oldest token row), channels' audiences (none for existing channels), and
    /// the index that prunes deactivated tokens by age.
    static let v11: [PostgresQuery] = [
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

    /// One meaning for each table on both engines, as SQLite's v12: answers written
    /// into the log row move to `results`, and `devices.last_used_at` (moved to
    /// `device_use` by v9) is cleared.
    static let v12: [PostgresQuery] = [
        """
        INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
            SELECT id, state, coalesce(status, 0), reason, apns_timestamp, attempts, coalesce(finished_at, created_at)
            FROM deliveries
            WHERE state IN ('delivered', 'failed')
        ON CONFLICT (delivery_id) DO NOTHING
        """,
        """
        UPDATE deliveries SET state = 'pending', status = NULL, reason = NULL, apns_timestamp = NULL, finished_at = NULL
            WHERE state IN ('delivered', 'failed')
        """,
        "UPDATE devices SET last_used_at = NULL WHERE last_used_at IS NOT NULL",
    ]
}

extension PostgresStore {
    /// On a connection of its own, so that a wrong URL, a refused password or a
    /// server that is down is one line at start-up, not a minute of pool retries.
    public func migrate() async throws(StoreError) {
        try await migrate(through: Schema.steps.count)
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
