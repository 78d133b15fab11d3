import PostgresNIO

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
    let postgres: [PostgresQuery]
}

/// The store's schema history, written once. SQLite records how many steps it has
/// applied (`PRAGMA user_version`), PostgreSQL which ones (`schema_migrations`); both
/// apply the missing ones in order, each in one transaction.
///
/// The data model the steps arrive at, on both engines:
/// - `deliveries` is the log, one row per (notification, device), written once when
///   enqueued. Its `state` is what the store itself decided: `pending` (to be sent),
///   or `batched` / `superseded` when a hold settled it without a send of its own.
/// - `outbox` holds the deliveries still to send (the claim path); a finish deletes
///   the row.
/// - `results` holds APNs' answer for each delivery sent, written once by a finish.
///   The log reads a delivery as its row with its result, if any (`DeliveryView`).
/// - `device_use` is when each device was last delivered to (`devices.last_used_at`
///   is no longer used); `device_changes` counts changes to the facts a fan-out reads.
enum Schema {
    static let steps: [SchemaStep] = [
        SchemaStep(number: 1, name: "devices, preferences and the delivery log",
                   sqlite: Migrations.v1, postgres: PostgresMigrations.v1),
        SchemaStep(number: 2, name: "payloads stored once per notification",
                   sqlite: Migrations.v2, postgres: PostgresMigrations.v2),
        SchemaStep(number: 3, name: "quiet hours and batching: held deliveries and holds",
                   sqlite: Migrations.v3, postgres: PostgresMigrations.v3),
        SchemaStep(number: 4, name: "Live Activity tokens, channels and broadcasts",
                   sqlite: Migrations.v4, postgres: PostgresMigrations.v4),
        SchemaStep(number: 5, name: "retention's indexes",
                   sqlite: Migrations.v5, postgres: PostgresMigrations.v5),
        SchemaStep(number: 6, name: "the claim walks free outbox rows only",
                   sqlite: Migrations.v6, postgres: PostgresMigrations.v6),
        SchemaStep(number: 7, name: "a company's devices by user, newest first",
                   sqlite: Migrations.v7, postgres: PostgresMigrations.v7),
        SchemaStep(number: 8, name: "APNs' answers in results",
                   sqlite: Migrations.v8, postgres: PostgresMigrations.v8),
        SchemaStep(number: 9, name: "last use in device_use",
                   sqlite: Migrations.v9, postgres: PostgresMigrations.v9),
        SchemaStep(number: 10, name: "device_changes counts what a fan-out read",
                   sqlite: Migrations.v10, postgres: PostgresMigrations.v10),
        SchemaStep(number: 11, name: "owners of activities, audiences of channels",
                   sqlite: Migrations.v11, postgres: PostgresMigrations.v11),
        SchemaStep(number: 12, name: "every answer in results, every last use in device_use",
                   sqlite: Migrations.v12, postgres: PostgresMigrations.v12),
    ]

    /// PostgreSQL databases made before the history was one list numbered their steps
    /// on their own: a step there combined, or came in another place than, the steps
    /// here. For each of those numbers, the steps here that the database has.
    static let postgresNumberingBefore12: [Int: [Int]] = [
        1: [1], 2: [1, 2], 3: [1, 2, 3, 6], 4: [1, 2, 3, 4, 6], 5: [1, 2, 3, 4, 5, 6], 6: [1, 2, 3, 4, 5, 6, 11],
    ]
}
