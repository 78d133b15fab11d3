/// One step of the schema, in both dialects. Step n means the same on SQLite and on
/// PostgreSQL: the same tables, columns and indexes with the same meanings, only
/// spelled for each engine. A step is never edited once released: a change is a new
/// step, added here with both spellings.
struct SchemaStep: Sendable {
    let number: Int
    /// What the step adds, in a few words (recorded on PostgreSQL beside the number).
    let name: String
    let sqlite: String
    /// Statements one by one (PostgreSQL's extended protocol runs one per query).
    let postgres: [String]
}

/// The store's schema history, written once. SQLite records how many steps it has
/// applied (`PRAGMA user_version`), PostgreSQL which ones (`schema_migrations`); both
/// apply the missing ones in order, each in one transaction.
///
/// The data model the steps arrive at, on both engines:
/// - `deliveries` is the log, one row per (notification, device), written once when
///   enqueued. Its `state` is what the store itself decided: `pending` (to be sent),
///   `batched` / `superseded` when a hold settled it without a send of its own, or
///   `cancelled` when the backend took it back before it went.
/// - `outbox` holds the deliveries still to send (the claim path); a finish deletes
///   the row.
/// - `results` holds APNs' answer for each delivery sent, written once by a finish.
///   The log reads a delivery as its row with its result, if any (`DeliveryView`).
/// - `device_use` is when each device was last delivered to (`devices.last_used_at`
///   is no longer used); `device_changes` counts changes to the facts a fan-out reads.
enum Schema {
    static let steps: [SchemaStep] = [v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16, v17, v18, v19, v20, v21]

    /// PostgreSQL databases made before the history was one list numbered their steps
    /// on their own: a step there combined, or came in another place than, the steps
    /// here. For each of those numbers, the steps here that the database has.
    static let postgresNumberingBefore12: [Int: [Int]] = [
        1: [1], 2: [1, 2], 3: [1, 2, 3, 6], 4: [1, 2, 3, 4, 6], 5: [1, 2, 3, 4, 5, 6], 6: [1, 2, 3, 4, 5, 6, 11],
    ]

    /// Times are milliseconds since 1970 (SQLite INTEGER, PostgreSQL BIGINT); SQLite
    /// booleans are 0/1.
    ///
    /// PostgreSQL: the outbox leaves room in each page for its leases (fillfactor).
    static let v1 = SchemaStep(
        number: 1, name: "devices, preferences and the delivery log",
        sqlite: """
        -- One row per (app, token), whoever owns it now: a token re-registered by another
        -- user moves to them. Never deleted: logout and dead tokens are soft deletes.
        CREATE TABLE devices (
            id                 INTEGER PRIMARY KEY,
            user_id            TEXT    NOT NULL,
            company_id         TEXT,
            app_type           TEXT    NOT NULL,
            token              TEXT    NOT NULL,
            platform           TEXT    NOT NULL,
            environment        TEXT    NOT NULL,
            device_name        TEXT,
            os_version         TEXT,
            app_version        TEXT,
            is_active          INTEGER NOT NULL DEFAULT 1,
            deactivated_reason TEXT,
            deactivated_at     INTEGER,
            -- The last (re-)registration: a 410 older than this does not kill the token.
            registered_at      INTEGER NOT NULL,
            created_at         INTEGER NOT NULL,
            updated_at         INTEGER NOT NULL,
            last_used_at       INTEGER,
            UNIQUE (app_type, token)
        );
        -- Fan-out reads active tokens only; partial indexes keep dead tokens out of them.
        CREATE INDEX devices_by_user ON devices (user_id, app_type) WHERE is_active = 1;
        CREATE INDEX devices_by_company ON devices (company_id, app_type) WHERE is_active = 1;

        -- Saved toggles only; a key never saved is absent (the service's default applies).
        CREATE TABLE preferences (
            user_id    TEXT    NOT NULL,
            app_type   TEXT    NOT NULL,
            key        TEXT    NOT NULL,
            value      INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, app_type, key)
        ) WITHOUT ROWID;

        CREATE TABLE notifications (
            id          TEXT    PRIMARY KEY,
            type        TEXT    NOT NULL,
            entity_type TEXT,
            entity_id   TEXT,
            app_type    TEXT    NOT NULL,
            created_at  INTEGER NOT NULL
        );

        -- The delivery log: one row per (notification, device), pending until its one
        -- final answer is written over it.
        CREATE TABLE deliveries (
            id                      INTEGER PRIMARY KEY,
            notification_id         TEXT    NOT NULL REFERENCES notifications (id),
            user_id                 TEXT    NOT NULL,
            device_id               INTEGER NOT NULL,
            token                   TEXT    NOT NULL,
            environment             TEXT    NOT NULL,
            apns_id                 TEXT    NOT NULL UNIQUE,
            payload                 BLOB    NOT NULL,
            push_type               TEXT    NOT NULL,
            priority                INTEGER,
            collapse_id             TEXT,
            expiration              INTEGER,
            state                   TEXT    NOT NULL DEFAULT 'pending'
                                            CHECK (state IN ('pending', 'delivered', 'failed')),
            status                  INTEGER,
            reason                  TEXT,
            apns_timestamp          INTEGER,
            attempts                INTEGER NOT NULL DEFAULT 0,
            cross_environment_tried INTEGER NOT NULL DEFAULT 0,
            created_at              INTEGER NOT NULL,
            finished_at             INTEGER
        );
        CREATE INDEX deliveries_by_notification ON deliveries (notification_id);

        -- The claim path, kept small (as River and Solid Queue do): only unfinished
        -- deliveries are here, and a finish deletes the row, so the claim scans a short
        -- index however long the log grows.
        CREATE TABLE outbox (
            delivery_id  INTEGER PRIMARY KEY REFERENCES deliveries (id),
            available_at INTEGER NOT NULL,
            lease_until  INTEGER,
            claimed_by   TEXT
        );
        CREATE INDEX outbox_by_age ON outbox (available_at, delivery_id);
        """,
        postgres: [
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
        ])

    /// The payload once per notification and badge instead of once per delivery (a
    /// 100k fan-out stored 100k copies of the same bytes). A delivery with a
    /// `payload_id` has an empty `payload`; older rows keep theirs.
    static let v2 = SchemaStep(
        number: 2, name: "payloads stored once per notification",
        sqlite: """
        CREATE TABLE payloads (
            id              INTEGER PRIMARY KEY,
            notification_id TEXT    NOT NULL REFERENCES notifications (id),
            bytes           BLOB    NOT NULL
        );
        ALTER TABLE deliveries ADD COLUMN payload_id INTEGER REFERENCES payloads (id);
        """,
        postgres: [
        """
        CREATE TABLE payloads (
            id              BIGSERIAL PRIMARY KEY,
            notification_id TEXT  NOT NULL REFERENCES notifications (id),
            bytes           BYTEA NOT NULL
        )
        """,
        "ALTER TABLE deliveries ADD COLUMN payload_id BIGINT REFERENCES payloads (id)",
        ])

    /// Quiet hours and batching.
    /// - Preferences may hold text (`quietHoursStart` "22:00", `timeZone`): `value` is
    ///   the boolean, `text_value` the text, exactly one of them set.
    /// - A delivery may be held: `not_before` is when it may go (the outbox's
    ///   `available_at` holds the same instant, so the claim's index does the waiting).
    ///   Two new final states: `batched` (carried by another delivery, a coalescing
    ///   window's one send) and `superseded` (a deferred delivery replaced by a later
    ///   one with the same collapse key); `carried_by` names that delivery, and a
    ///   carrier's `batched` counts its members.
    /// - `holds`: the open windows, one per device and key, small (a row is useless once
    ///   its window closes and is deleted by the next hold-path enqueue).
    ///
    /// SQLite cannot change a CHECK in place: `deliveries` (and `outbox`, which refers
    /// to it) are rebuilt, once, by copy. Foreign keys stay on (GRDB's default; they
    /// cannot be switched inside this transaction), so the order is: new tables, copy,
    /// drop the child (outbox) before its parent, rename (which rewrites the new
    /// outbox's reference to the final name).
    ///
    /// PostgreSQL changes the columns and the CHECKs in place.
    static let v3 = SchemaStep(
        number: 3, name: "quiet hours and batching: held deliveries and holds",
        sqlite: """
        CREATE TABLE preferences_v3 (
            user_id    TEXT    NOT NULL,
            app_type   TEXT    NOT NULL,
            key        TEXT    NOT NULL,
            value      INTEGER,
            text_value TEXT,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, app_type, key),
            CHECK ((value IS NULL) <> (text_value IS NULL))
        ) WITHOUT ROWID;
        INSERT INTO preferences_v3 (user_id, app_type, key, value, updated_at)
            SELECT user_id, app_type, key, value, updated_at FROM preferences;
        DROP TABLE preferences;
        ALTER TABLE preferences_v3 RENAME TO preferences;

        CREATE TABLE deliveries_v3 (
            id                      INTEGER PRIMARY KEY,
            notification_id         TEXT    NOT NULL REFERENCES notifications (id),
            user_id                 TEXT    NOT NULL,
            device_id               INTEGER NOT NULL,
            token                   TEXT    NOT NULL,
            environment             TEXT    NOT NULL,
            apns_id                 TEXT    NOT NULL UNIQUE,
            payload                 BLOB    NOT NULL,
            push_type               TEXT    NOT NULL,
            priority                INTEGER,
            collapse_id             TEXT,
            expiration              INTEGER,
            state                   TEXT    NOT NULL DEFAULT 'pending'
                                            CHECK (state IN ('pending', 'delivered', 'failed', 'batched', 'superseded')),
            status                  INTEGER,
            reason                  TEXT,
            apns_timestamp          INTEGER,
            attempts                INTEGER NOT NULL DEFAULT 0,
            cross_environment_tried INTEGER NOT NULL DEFAULT 0,
            created_at              INTEGER NOT NULL,
            finished_at             INTEGER,
            payload_id              INTEGER REFERENCES payloads (id),
            not_before              INTEGER,
            carried_by              INTEGER REFERENCES deliveries_v3 (id),
            batched                 INTEGER
        );
        INSERT INTO deliveries_v3 (id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                                   push_type, priority, collapse_id, expiration, state, status, reason,
                                   apns_timestamp, attempts, cross_environment_tried, created_at, finished_at,
                                   payload_id)
            SELECT id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                   push_type, priority, collapse_id, expiration, state, status, reason,
                   apns_timestamp, attempts, cross_environment_tried, created_at, finished_at, payload_id
            FROM deliveries;
        CREATE TABLE outbox_v3 (
            delivery_id  INTEGER PRIMARY KEY REFERENCES deliveries_v3 (id),
            available_at INTEGER NOT NULL,
            lease_until  INTEGER,
            claimed_by   TEXT
        );
        INSERT INTO outbox_v3 (delivery_id, available_at, lease_until, claimed_by)
            SELECT delivery_id, available_at, lease_until, claimed_by FROM outbox;
        DROP TABLE outbox;
        DROP TABLE deliveries;
        ALTER TABLE deliveries_v3 RENAME TO deliveries;
        ALTER TABLE outbox_v3 RENAME TO outbox;
        CREATE INDEX deliveries_by_notification ON deliveries (notification_id);
        CREATE INDEX outbox_by_age ON outbox (available_at, delivery_id);

        CREATE TABLE holds (
            device_id   INTEGER NOT NULL,
            kind        TEXT    NOT NULL CHECK (kind IN ('coalesce', 'defer')),
            key         TEXT    NOT NULL,
            delivery_id INTEGER NOT NULL REFERENCES deliveries (id),
            closes_at   INTEGER NOT NULL,
            PRIMARY KEY (device_id, kind, key)
        ) WITHOUT ROWID;
        CREATE INDEX holds_by_close ON holds (closes_at);
        """,
        postgres: [
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
        ])

    /// Live Activities and broadcast channels.
    /// - A Live Activity push token is a `devices` row with platform `liveactivity`
    ///   (so the outbox's claim, the 410 rules and `last_used_at` treat it as any
    ///   token), plus what kind it is: `update` (one running activity, `activity_id`)
    ///   or `start` (push-to-start, one per attributes type).
    /// - `channels`: one broadcast channel per (app, environment, entity), as APNs
    ///   issued it.
    /// - `broadcasts`: each send to a channel, pending until its one final entry, with
    ///   a lease of its own (a small outbox: the device outbox's claim is tuned for
    ///   fan-outs to tokens, and a broadcast has no token, no apns-id of ours and
    ///   other answers).
    static let v4 = SchemaStep(
        number: 4, name: "Live Activity tokens, channels and broadcasts",
        sqlite: """
        CREATE TABLE live_activity_tokens (
            device_id       INTEGER PRIMARY KEY REFERENCES devices (id),
            kind            TEXT    NOT NULL CHECK (kind IN ('update', 'start')),
            activity_id     TEXT,
            attributes_type TEXT    NOT NULL,
            CHECK ((kind = 'update') = (activity_id IS NOT NULL))
        );
        CREATE INDEX live_activity_tokens_by_activity ON live_activity_tokens (activity_id)
            WHERE activity_id IS NOT NULL;

        CREATE TABLE channels (
            id             INTEGER PRIMARY KEY,
            app_type       TEXT    NOT NULL,
            environment    TEXT    NOT NULL,
            entity_type    TEXT    NOT NULL,
            entity_id      TEXT    NOT NULL,
            channel_id     TEXT    NOT NULL,
            storage_policy INTEGER NOT NULL,
            created_at     INTEGER NOT NULL,
            UNIQUE (app_type, environment, entity_type, entity_id)
        );

        CREATE TABLE broadcasts (
            id             TEXT    PRIMARY KEY,
            app_type       TEXT    NOT NULL,
            environment    TEXT    NOT NULL,
            entity_type    TEXT    NOT NULL,
            entity_id      TEXT    NOT NULL,
            channel_id     TEXT    NOT NULL,
            payload        BLOB    NOT NULL,
            priority       INTEGER,
            expiration     INTEGER NOT NULL,
            state          TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
            status         INTEGER,
            reason         TEXT,
            request_id     TEXT,
            unique_id      TEXT,
            attempts       INTEGER NOT NULL DEFAULT 0,
            created_at     INTEGER NOT NULL,
            finished_at    INTEGER,
            available_at   INTEGER NOT NULL,
            lease_until    INTEGER,
            claimed_by     TEXT
        );
        CREATE INDEX broadcasts_pending ON broadcasts (available_at) WHERE state = 'pending';
        """,
        postgres: [
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
        ])

    /// Retention: pruning walks notifications by age, finds their payloads
    /// and the batched deliveries that name a pruned carrier, and finished broadcasts
    /// by age, each through an index rather than a scan of the whole log.
    static let v5 = SchemaStep(
        number: 5, name: "retention's indexes",
        sqlite: """
        CREATE INDEX notifications_by_age ON notifications (created_at);
        CREATE INDEX payloads_by_notification ON payloads (notification_id);
        CREATE INDEX deliveries_by_carrier ON deliveries (carried_by) WHERE carried_by IS NOT NULL;
        CREATE INDEX broadcasts_finished ON broadcasts (finished_at) WHERE state <> 'pending';
        """,
        postgres: [
        "CREATE INDEX notifications_by_age ON notifications (created_at)",
        "CREATE INDEX payloads_by_notification ON payloads (notification_id)",
        "CREATE INDEX deliveries_by_carrier ON deliveries (carried_by) WHERE carried_by IS NOT NULL",
        "CREATE INDEX broadcasts_finished ON broadcasts (finished_at) WHERE state <> 'pending'",
        ])

    /// The claim's index becomes partial, so that a claim walks free rows
    /// (`outbox_free`) only, and expired leases have their own small index. With one
    /// index, every claim stepped over the rows the workers held (a worker claims
    /// ahead, so thousands): in a 100k fan-out that walk was most of the claim's cost.
    /// A lease now moves its row between the two indexes, which costs less.
    static let v6 = SchemaStep(
        number: 6, name: "the claim walks free outbox rows only",
        sqlite: """
        DROP INDEX outbox_by_age;
        CREATE INDEX outbox_free ON outbox (available_at, delivery_id) WHERE claimed_by IS NULL;
        CREATE INDEX outbox_leased ON outbox (lease_until) WHERE claimed_by IS NOT NULL;
        """,
        postgres: [
        // v1's leases were HOT updates of unindexed columns, but every claim then walked
        // past the rows workers held (thousands, with several instances) to reach free
        // ones. Now a lease moves its row from `outbox_free` to `outbox_leased` (an
        // update with index entries, the price of a claim that reads only what it takes).
        "DROP INDEX outbox_by_age",
        "CREATE INDEX outbox_free ON outbox (available_at, delivery_id) WHERE claimed_by IS NULL",
        "CREATE INDEX outbox_leased ON outbox (lease_until) WHERE claimed_by IS NOT NULL",
        ])

    /// A company's fan-out reads its devices a user at a time, newest first
    /// (`companyDevicesSQL`). The index now holds them in that order: SQLite had
    /// walked every active device of every company by user to avoid the sort, then
    /// sorted each user's rows (a 100k-device company: a fifth of the read).
    static let v7 = SchemaStep(
        number: 7, name: "a company's devices by user, newest first",
        sqlite: """
        DROP INDEX devices_by_company;
        CREATE INDEX devices_by_company ON devices (company_id, app_type, user_id, registered_at DESC, id DESC)
            WHERE is_active = 1;
        """,
        postgres: [
        "DROP INDEX devices_by_company",
        """
        CREATE INDEX devices_by_company ON devices (company_id, app_type, user_id, registered_at DESC, id DESC)
            WHERE is_active
        """,
        ])

    /// A delivery's final answer from APNs goes into a narrow table of its own instead
    /// of being written over its wide log row: the finish is an append (in delivery
    /// order, at the table's end) rather than a rewrite of each row, and on
    /// PostgreSQL the log rows the claim joins never leave dead versions behind. The
    /// log reads a delivery as its row with its result, if any (`DeliveryView`);
    /// deliveries made final by a hold (batched, superseded) keep their state in
    /// `deliveries`, and answers written into log rows before this step move here at
    /// step 12. No foreign key: a result is only ever written for a delivery that has
    /// just left the outbox, and the check was a look-up per row.
    static let v8 = SchemaStep(
        number: 8, name: "APNs' answers in results",
        sqlite: """
        CREATE TABLE results (
            delivery_id    INTEGER PRIMARY KEY,
            state          TEXT    NOT NULL CHECK (state IN ('delivered', 'failed')),
            status         INTEGER NOT NULL,
            reason         TEXT,
            apns_timestamp INTEGER,
            attempts       INTEGER NOT NULL,
            finished_at    INTEGER NOT NULL
        );
        """,
        postgres: [
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
        ])

    /// When a device was last delivered to, in a narrow table of its own, for the
    /// same reason as `results` (v8): every delivered answer rewrote its device's
    /// wide row, where this is a small upsert. `devices.last_used_at` is no longer
    /// written or read; its values move here.
    static let v9 = SchemaStep(
        number: 9, name: "last use in device_use",
        sqlite: """
        CREATE TABLE device_use (
            device_id    INTEGER PRIMARY KEY,
            last_used_at INTEGER NOT NULL
        );
        INSERT INTO device_use (device_id, last_used_at)
            SELECT id, last_used_at FROM devices WHERE last_used_at IS NOT NULL;
        """,
        postgres: [
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
        ])

    /// A count of changes to what a fan-out read of its devices: whether one is
    /// active, whose it is, its app and platform (the facts a claim checks), and
    /// deletions. Triggers, so that every writer counts, in this process or
    /// another; a registration that changes none of those facts (the usual
    /// re-registration) counts nothing. A fan-out's hand-over reads each device
    /// as a claim does (`FanOutPlans.leaseFanOutPage`), so no statement reads the
    /// count; the step stays, as every step of the history does.
    static let v10 = SchemaStep(
        number: 10, name: "device_changes counts what a fan-out read",
        sqlite: """
        CREATE TABLE device_changes (
            id         INTEGER PRIMARY KEY CHECK (id = 1),
            generation INTEGER NOT NULL
        );
        INSERT INTO device_changes (id, generation) VALUES (1, 0);
        CREATE TRIGGER device_changed AFTER UPDATE OF is_active, user_id, app_type, platform ON devices
            WHEN OLD.is_active IS NOT NEW.is_active OR OLD.user_id IS NOT NEW.user_id
              OR OLD.app_type IS NOT NEW.app_type OR OLD.platform IS NOT NEW.platform
        BEGIN
            UPDATE device_changes SET generation = generation + 1;
        END;
        CREATE TRIGGER device_deleted AFTER DELETE ON devices
        BEGIN
            UPDATE device_changes SET generation = generation + 1;
        END;
        """,
        postgres: [
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
        // At commit (deferred): the one counter row is then locked last and only
        // while committing, so a transaction that holds it never waits for a device
        // row another holds (instances finishing and registering at once would
        // otherwise deadlock on it).
        """
        CREATE CONSTRAINT TRIGGER device_changed AFTER UPDATE OF is_active, user_id, app_type, platform ON devices
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
            WHEN (OLD.is_active IS DISTINCT FROM NEW.is_active OR OLD.user_id IS DISTINCT FROM NEW.user_id
                  OR OLD.app_type IS DISTINCT FROM NEW.app_type OR OLD.platform IS DISTINCT FROM NEW.platform)
            EXECUTE FUNCTION device_changed()
        """,
        """
        CREATE CONSTRAINT TRIGGER device_deleted AFTER DELETE ON devices
            DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION device_changed()
        """,
        ])

    /// Who may do what with whose tokens and channels.
    /// - `live_activities`: an activity's owner, the user who first registered a
    ///   token for it (per app). Existing activities get the user of their oldest
    ///   token row; another user's tokens under the same id stay, and no send by
    ///   the activity reaches them.
    /// - A channel's audience: `is_public`, `audience_company`, and `channel_users`.
    ///   Existing channels get none (only the backend reads them) until the backend
    ///   names one.
    /// - Deactivated tokens are pruned by age (`devices_inactive`); a row soft-deleted
    ///   without a time gets its last update's.
    static let v11 = SchemaStep(
        number: 11, name: "owners of activities, audiences of channels",
        sqlite: """
        CREATE TABLE live_activities (
            app_type    TEXT    NOT NULL,
            activity_id TEXT    NOT NULL,
            user_id     TEXT    NOT NULL,
            created_at  INTEGER NOT NULL,
            PRIMARY KEY (app_type, activity_id)
        ) WITHOUT ROWID;
        INSERT INTO live_activities (app_type, activity_id, user_id, created_at)
            SELECT app_type, activity_id, user_id, created_at FROM (
                -- SQLite takes the bare columns from the row min() picked.
                SELECT d.app_type, l.activity_id, d.user_id, d.created_at, min(d.id)
                FROM live_activity_tokens l JOIN devices d ON d.id = l.device_id
                WHERE l.activity_id IS NOT NULL
                GROUP BY d.app_type, l.activity_id);

        ALTER TABLE channels ADD COLUMN is_public INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE channels ADD COLUMN audience_company TEXT;
        CREATE TABLE channel_users (
            channel INTEGER NOT NULL REFERENCES channels (id) ON DELETE CASCADE,
            user_id TEXT    NOT NULL,
            PRIMARY KEY (channel, user_id)
        ) WITHOUT ROWID;

        UPDATE devices SET deactivated_at = updated_at WHERE is_active = 0 AND deactivated_at IS NULL;
        CREATE INDEX devices_inactive ON devices (deactivated_at) WHERE is_active = 0;
        """,
        postgres: [
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
        ])

    /// One meaning for each table on both engines (see `Schema`): an answer from
    /// APNs is a `results` row, and `deliveries.state` says only what the store
    /// decided (pending, batched, superseded). Answers written into the log row
    /// before v8 move to `results`; the stale `devices.last_used_at` (moved to
    /// `device_use` by v9) is cleared.
    static let v12 = SchemaStep(
        number: 12, name: "every answer in results, every last use in device_use",
        sqlite: """
        INSERT INTO results (delivery_id, state, status, reason, apns_timestamp, attempts, finished_at)
            SELECT id, state, coalesce(status, 0), reason, apns_timestamp, attempts, coalesce(finished_at, created_at)
            FROM deliveries
            WHERE state IN ('delivered', 'failed') AND id NOT IN (SELECT delivery_id FROM results);
        UPDATE deliveries SET state = 'pending', status = NULL, reason = NULL, apns_timestamp = NULL, finished_at = NULL
            WHERE state IN ('delivered', 'failed');
        UPDATE devices SET last_used_at = NULL WHERE last_used_at IS NOT NULL;
        """,
        postgres: [
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
        ])

    /// Idempotency keys (`IdempotencyKeys`): one row per API credential's scope and
    /// key, inserted before the work it guards; `resource_id` names what the work
    /// creates, `status` and `body` are the answer to give again (NULL while the
    /// first request still runs, until `claimed_until`).
    static let v13 = SchemaStep(
        number: 13, name: "idempotency keys",
        sqlite: """
        CREATE TABLE idempotency_keys (
            scope           TEXT    NOT NULL,
            idempotency_key TEXT    NOT NULL,
            fingerprint     TEXT    NOT NULL,
            resource_id     TEXT    NOT NULL,
            created_at      INTEGER NOT NULL,
            claimed_until   INTEGER NOT NULL,
            status          INTEGER,
            body            BLOB,
            PRIMARY KEY (scope, idempotency_key)
        );
        CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
        """,
        postgres: [
        """
        CREATE TABLE idempotency_keys (
            scope           TEXT    NOT NULL,
            idempotency_key TEXT    NOT NULL,
            fingerprint     TEXT    NOT NULL,
            resource_id     TEXT    NOT NULL,
            created_at      BIGINT  NOT NULL,
            claimed_until   BIGINT  NOT NULL,
            status          INTEGER,
            body            BYTEA,
            PRIMARY KEY (scope, idempotency_key)
        )
        """,
        "CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)",
        ])

    /// Scheduled sends (`ScheduledSends`): the checked request, its time, and its
    /// state; at most one pending schedule per app and `schedule_key`.
    static let v14 = SchemaStep(
        number: 14, name: "scheduled notifications",
        sqlite: """
        CREATE TABLE scheduled_notifications (
            id            TEXT    PRIMARY KEY,
            kind          TEXT    NOT NULL,
            app_type      TEXT    NOT NULL,
            type          TEXT    NOT NULL,
            schedule_key  TEXT,
            request       BLOB    NOT NULL,
            send_at       INTEGER NOT NULL,
            created_at    INTEGER NOT NULL,
            state         TEXT    NOT NULL,
            superseded_by TEXT,
            lease_owner   TEXT,
            lease_until   INTEGER,
            finished_at   INTEGER,
            error         TEXT
        );
        CREATE INDEX scheduled_notifications_due ON scheduled_notifications (send_at) WHERE state IN ('scheduled', 'sending');
        CREATE UNIQUE INDEX scheduled_notifications_pending_keys ON scheduled_notifications (app_type, schedule_key)
            WHERE state = 'scheduled' AND schedule_key IS NOT NULL;
        CREATE INDEX scheduled_notifications_finished ON scheduled_notifications (finished_at)
            WHERE state NOT IN ('scheduled', 'sending');
        """,
        postgres: [
        """
        CREATE TABLE scheduled_notifications (
            id            TEXT    PRIMARY KEY,
            kind          TEXT    NOT NULL,
            app_type      TEXT    NOT NULL,
            type          TEXT    NOT NULL,
            schedule_key  TEXT,
            request       BYTEA   NOT NULL,
            send_at       BIGINT  NOT NULL,
            created_at    BIGINT  NOT NULL,
            state         TEXT    NOT NULL,
            superseded_by TEXT,
            lease_owner   TEXT,
            lease_until   BIGINT,
            finished_at   BIGINT,
            error         TEXT
        )
        """,
        "CREATE INDEX scheduled_notifications_due ON scheduled_notifications (send_at) WHERE state IN ('scheduled', 'sending')",
        """
        CREATE UNIQUE INDEX scheduled_notifications_pending_keys ON scheduled_notifications (app_type, schedule_key)
            WHERE state = 'scheduled' AND schedule_key IS NOT NULL
        """,
        """
        CREATE INDEX scheduled_notifications_finished ON scheduled_notifications (finished_at)
            WHERE state NOT IN ('scheduled', 'sending')
        """,
        ])

    /// What the backend hears, and what the devices report.
    /// - `webhook_events`: one row per event and receiver (`endpoint`, its URL),
    ///   written in the transaction of the change it reports, pending until the
    ///   receiver answers 2xx or the retry period ends (`failed`). `subject` names
    ///   what it is about, so that one change never makes two events for a receiver.
    /// - `webhook_checks`: notifications a finish touched, to be looked at (from
    ///   `check_at`) for whether anything of theirs is still pending; a finish only
    ///   marks them, so that the check's cost stays off the send path.
    /// - `delivery_events`: when a device reported a delivery received and opened.
    static let v15 = SchemaStep(
        number: 15, name: "webhook events, receipts and opens",
        sqlite: """
        CREATE TABLE webhook_events (
            id           INTEGER PRIMARY KEY,
            event_id     TEXT    NOT NULL UNIQUE,
            endpoint     TEXT    NOT NULL,
            type         TEXT    NOT NULL,
            subject      TEXT    NOT NULL,
            data         TEXT    NOT NULL,
            created_at   INTEGER NOT NULL,
            state        TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
            attempts     INTEGER NOT NULL DEFAULT 0,
            available_at INTEGER NOT NULL,
            lease_until  INTEGER,
            claimed_by   TEXT,
            last_status  INTEGER,
            last_error   TEXT,
            finished_at  INTEGER,
            UNIQUE (endpoint, type, subject)
        );
        CREATE INDEX webhook_events_due ON webhook_events (available_at) WHERE state = 'pending';
        CREATE INDEX webhook_events_by_state ON webhook_events (state, id);
        CREATE TABLE webhook_checks (
            notification_id TEXT    PRIMARY KEY,
            check_at        INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE delivery_events (
            delivery_id     INTEGER PRIMARY KEY,
            notification_id TEXT    NOT NULL,
            received_at     INTEGER,
            opened_at       INTEGER
        );
        CREATE INDEX delivery_events_by_notification ON delivery_events (notification_id);
        """,
        postgres: [
        """
        CREATE TABLE webhook_events (
            id           BIGSERIAL PRIMARY KEY,
            event_id     TEXT    NOT NULL UNIQUE,
            endpoint     TEXT    NOT NULL,
            type         TEXT    NOT NULL,
            subject      TEXT    NOT NULL,
            data         TEXT    NOT NULL,
            created_at   BIGINT  NOT NULL,
            state        TEXT    NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
            attempts     INTEGER NOT NULL DEFAULT 0,
            available_at BIGINT  NOT NULL,
            lease_until  BIGINT,
            claimed_by   TEXT,
            last_status  INTEGER,
            last_error   TEXT,
            finished_at  BIGINT,
            UNIQUE (endpoint, type, subject)
        )
        """,
        "CREATE INDEX webhook_events_due ON webhook_events (available_at) WHERE state = 'pending'",
        "CREATE INDEX webhook_events_by_state ON webhook_events (state, id)",
        """
        CREATE TABLE webhook_checks (
            notification_id TEXT   PRIMARY KEY,
            check_at        BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE delivery_events (
            delivery_id     BIGINT PRIMARY KEY,
            notification_id TEXT   NOT NULL,
            received_at     BIGINT,
            opened_at       BIGINT
        )
        """,
        "CREATE INDEX delivery_events_by_notification ON delivery_events (notification_id)",
        ])

    /// A new final state, `cancelled`: a delivery the backend took back
    /// (`DELETE /v1/notifications/{id}`) before a worker claimed it.
    ///
    /// SQLite cannot change a CHECK in place: `deliveries` and the two tables that
    /// refer to it (`outbox`, `holds`) are rebuilt by copy, as at v3: new tables,
    /// copy, drop the children before their parent, rename (which rewrites the new
    /// children's references to the final name), then the indexes again.
    ///
    /// PostgreSQL changes the CHECK in place.
    static let v16 = SchemaStep(
        number: 16, name: "cancelled deliveries",
        sqlite: """
        CREATE TABLE deliveries_v16 (
            id                      INTEGER PRIMARY KEY,
            notification_id         TEXT    NOT NULL REFERENCES notifications (id),
            user_id                 TEXT    NOT NULL,
            device_id               INTEGER NOT NULL,
            token                   TEXT    NOT NULL,
            environment             TEXT    NOT NULL,
            apns_id                 TEXT    NOT NULL UNIQUE,
            payload                 BLOB    NOT NULL,
            push_type               TEXT    NOT NULL,
            priority                INTEGER,
            collapse_id             TEXT,
            expiration              INTEGER,
            state                   TEXT    NOT NULL DEFAULT 'pending'
                                            CHECK (state IN ('pending', 'delivered', 'failed', 'batched', 'superseded',
                                                             'cancelled')),
            status                  INTEGER,
            reason                  TEXT,
            apns_timestamp          INTEGER,
            attempts                INTEGER NOT NULL DEFAULT 0,
            cross_environment_tried INTEGER NOT NULL DEFAULT 0,
            created_at              INTEGER NOT NULL,
            finished_at             INTEGER,
            payload_id              INTEGER REFERENCES payloads (id),
            not_before              INTEGER,
            carried_by              INTEGER REFERENCES deliveries_v16 (id),
            batched                 INTEGER
        );
        INSERT INTO deliveries_v16 (id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    push_type, priority, collapse_id, expiration, state, status, reason,
                                    apns_timestamp, attempts, cross_environment_tried, created_at, finished_at,
                                    payload_id, not_before, carried_by, batched)
            SELECT id, notification_id, user_id, device_id, token, environment, apns_id, payload,
                   push_type, priority, collapse_id, expiration, state, status, reason,
                   apns_timestamp, attempts, cross_environment_tried, created_at, finished_at,
                   payload_id, not_before, carried_by, batched
            FROM deliveries;
        CREATE TABLE outbox_v16 (
            delivery_id  INTEGER PRIMARY KEY REFERENCES deliveries_v16 (id),
            available_at INTEGER NOT NULL,
            lease_until  INTEGER,
            claimed_by   TEXT
        );
        INSERT INTO outbox_v16 (delivery_id, available_at, lease_until, claimed_by)
            SELECT delivery_id, available_at, lease_until, claimed_by FROM outbox;
        CREATE TABLE holds_v16 (
            device_id   INTEGER NOT NULL,
            kind        TEXT    NOT NULL CHECK (kind IN ('coalesce', 'defer')),
            key         TEXT    NOT NULL,
            delivery_id INTEGER NOT NULL REFERENCES deliveries_v16 (id),
            closes_at   INTEGER NOT NULL,
            PRIMARY KEY (device_id, kind, key)
        ) WITHOUT ROWID;
        INSERT INTO holds_v16 (device_id, kind, key, delivery_id, closes_at)
            SELECT device_id, kind, key, delivery_id, closes_at FROM holds;
        DROP TABLE holds;
        DROP TABLE outbox;
        DROP TABLE deliveries;
        ALTER TABLE deliveries_v16 RENAME TO deliveries;
        ALTER TABLE outbox_v16 RENAME TO outbox;
        ALTER TABLE holds_v16 RENAME TO holds;
        CREATE INDEX deliveries_by_notification ON deliveries (notification_id);
        CREATE INDEX deliveries_by_carrier ON deliveries (carried_by) WHERE carried_by IS NOT NULL;
        CREATE INDEX outbox_free ON outbox (available_at, delivery_id) WHERE claimed_by IS NULL;
        CREATE INDEX outbox_leased ON outbox (lease_until) WHERE claimed_by IS NOT NULL;
        CREATE INDEX holds_by_close ON holds (closes_at);
        """,
        postgres: [
        "ALTER TABLE deliveries DROP CONSTRAINT deliveries_state_check",
        """
        ALTER TABLE deliveries ADD CONSTRAINT deliveries_state_check
            CHECK (state IN ('pending', 'delivered', 'failed', 'batched', 'superseded', 'cancelled'))
        """,
        ])

    /// A user's deliveries, newest first (support's look-up of a user), without
    /// reading the whole log.
    static let v17 = SchemaStep(
        number: 17, name: "deliveries by user",
        sqlite: "CREATE INDEX deliveries_by_user ON deliveries (user_id, id)",
        postgres: ["CREATE INDEX deliveries_by_user ON deliveries (user_id, id)"])

    /// A fan-out written in parts marks its notification as planning until its last
    /// part is in: `planning_until` is when the mark runs out unless the planner
    /// moves it on (NULL: the plan is complete, as for every notification before
    /// this step). Its deliveries wait outside the outbox meanwhile.
    static let v18 = SchemaStep(
        number: 18, name: "notifications planning in parts",
        sqlite: """
        ALTER TABLE notifications ADD COLUMN planning_until INTEGER;
        CREATE INDEX notifications_planning ON notifications (planning_until) WHERE planning_until IS NOT NULL;
        """,
        postgres: [
        "ALTER TABLE notifications ADD COLUMN planning_until BIGINT",
        "CREATE INDEX notifications_planning ON notifications (planning_until) WHERE planning_until IS NOT NULL",
        ])

    /// Who created, cancelled or changed what (`AuditLogStore`): appended once per
    /// call, pruned by the delivery log's retention.
    static let v19 = SchemaStep(
        number: 19, name: "the audit log",
        sqlite: """
        CREATE TABLE audit_log (
            id             INTEGER PRIMARY KEY,
            at             INTEGER NOT NULL,
            actor          TEXT    NOT NULL,
            method         TEXT    NOT NULL,
            path           TEXT    NOT NULL,
            app_type       TEXT,
            target         TEXT,
            status         INTEGER NOT NULL,
            remote_address TEXT
        );
        CREATE INDEX audit_log_by_time ON audit_log (at);
        """,
        postgres: [
        """
        CREATE TABLE audit_log (
            id             BIGSERIAL PRIMARY KEY,
            at             BIGINT  NOT NULL,
            actor          TEXT    NOT NULL,
            method         TEXT    NOT NULL,
            path           TEXT    NOT NULL,
            app_type       TEXT,
            target         TEXT,
            status         INTEGER NOT NULL,
            remote_address TEXT
        )
        """,
        "CREATE INDEX audit_log_by_time ON audit_log (at)",
        ])

    /// Activity ids that are UUIDs are kept in lower case (the service reads them so
    /// since this step): ids stored before in another case are lower-cased. Where two
    /// spellings of one id had owners, the first to register stays its owner; the
    /// other's tokens stay, and no send by the activity reaches them.
    static let v20 = SchemaStep(
        number: 20, name: "activity ids in one case",
        sqlite: """
        DELETE FROM live_activities WHERE activity_id GLOB '\(uuidGlob)' AND EXISTS (
            SELECT 1 FROM live_activities o
            WHERE o.app_type = live_activities.app_type AND lower(o.activity_id) = lower(live_activities.activity_id)
              AND (o.created_at, o.activity_id) < (live_activities.created_at, live_activities.activity_id));
        UPDATE live_activities SET activity_id = lower(activity_id)
            WHERE activity_id GLOB '\(uuidGlob)' AND activity_id <> lower(activity_id);
        UPDATE live_activity_tokens SET activity_id = lower(activity_id)
            WHERE activity_id GLOB '\(uuidGlob)' AND activity_id <> lower(activity_id);
        """,
        postgres: [
        """
        DELETE FROM live_activities a WHERE activity_id ~ '\(uuidPattern)' AND EXISTS (
            SELECT 1 FROM live_activities o
            WHERE o.app_type = a.app_type AND lower(o.activity_id) = lower(a.activity_id)
              AND (o.created_at, o.activity_id) < (a.created_at, a.activity_id))
        """,
        """
        UPDATE live_activities SET activity_id = lower(activity_id)
            WHERE activity_id ~ '\(uuidPattern)' AND activity_id <> lower(activity_id)
        """,
        """
        UPDATE live_activity_tokens SET activity_id = lower(activity_id)
            WHERE activity_id ~ '\(uuidPattern)' AND activity_id <> lower(activity_id)
        """,
        ])

    /// A UUID's spelling in either case: SQLite's GLOB, PostgreSQL's regular expression.
    static let uuidGlob = "[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]-[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]-[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]-[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]-[0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f][0-9A-Fa-f]"
    static let uuidPattern = "^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
    /// A `schedule_key` names a notification or a Live Activity, never both: its
    /// pending index is per kind.
    static let v21 = SchemaStep(
        number: 21, name: "schedule keys per kind",
        sqlite: """
        DROP INDEX scheduled_notifications_pending_keys;
        CREATE UNIQUE INDEX scheduled_notifications_pending_keys ON scheduled_notifications (app_type, kind, schedule_key)
            WHERE state = 'scheduled' AND schedule_key IS NOT NULL;
        """,
        postgres: [
        "DROP INDEX scheduled_notifications_pending_keys",
        """
        CREATE UNIQUE INDEX scheduled_notifications_pending_keys ON scheduled_notifications (app_type, kind, schedule_key)
            WHERE state = 'scheduled' AND schedule_key IS NOT NULL
        """,
        ])
}
