/// One engine's connection inside a transaction, as the store's policy sees it: a
/// statement by its `Spelling`, with arguments, and its rows read by position. The
/// policy is written once over this; each engine's driver only runs statements.
protocol StoreConnection {
    associatedtype Row: StoreRow
    /// Which engine, for the few policies that differ by a capability rather than a
    /// spelling (see `Engine`).
    var engine: Engine { get }
    /// The statement's rows, read whole.
    func rows(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws -> [Row]
    /// The statement's rows one at a time, as the engine reads them: on SQLite
    /// straight from the statement, no row copied (a claim's or a fan-out page's
    /// thousands); `body` must not keep a row.
    func forEachRow(_ statement: Spelling, _ arguments: [any StoreBindable],
                    _ body: (Row) throws -> Void) async throws
    /// A statement whose rows do not matter.
    func run(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws
    /// Tells idle workers of every instance that work was added, when this
    /// transaction commits: PostgreSQL's NOTIFY; nothing on SQLite, whose one process
    /// wakes its own workers.
    func wakeWorkers() async throws

    // The outbox's writes by the thousand: each engine's fastest form of the same rows.

    /// Writes `payloads` as rows of the notification; returns their ids, in order.
    func insertPayloads(notificationID: String, _ payloads: [[UInt8]]) async throws -> [Int64]
    /// Writes the log rows of `deliveries` (nothing in the outbox); `payloadOf[i]` is
    /// delivery i's payload row.
    func insertDeliveryRows(notificationID: String, _ deliveries: [NewDelivery], payloadOf: [Int64],
                            now: Int64) async throws
    /// A finish's first two steps (see `Finishes`): the batch's rows this worker
    /// holds leave the outbox (`held`: leaving it is the proof of holding), and each
    /// of those gets its result, none over one already there (`recorded`; nil: every
    /// one of `held`).
    func leaveOutboxAndRecord(worker: String, _ outcomes: [DeliveryOutcome],
                              now: Int64) async throws -> (held: [DeliveryOutcome], recorded: Set<Int64>?)
}

extension StoreConnection {
    /// Each row made into a value as it is read (see `forEachRow`).
    func mapRows<T>(_ statement: Spelling, _ arguments: [any StoreBindable],
                    _ transform: (Row) throws -> T) async throws -> [T] {
        var values: [T] = []
        try await forEachRow(statement, arguments) { values.append(try transform($0)) }
        return values
    }

    /// The first row, if any.
    func row(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws -> Row? {
        try await rows(statement, arguments).first
    }

    /// The first column of the first row, as an integer (a count, an id), if any.
    func int64(_ statement: Spelling, _ arguments: [any StoreBindable]) async throws -> Int64? {
        try await rows(statement, arguments).first.map { try $0.optionalInt64(0) } ?? nil
    }
}

/// The engines, named where a policy asks what one can do.
enum Engine: Sendable {
    /// One writer at a time (the file's lock): no row locks, no SKIP LOCKED.
    case sqlite
    /// Many writers: row locks, `FOR UPDATE SKIP LOCKED`, advisory locks.
    case postgres
}

/// A store on one engine: its transactions, in which the policy runs. `doing` names
/// the call in the one-line error a failure becomes.
protocol StoreEngine: Sendable {
    associatedtype Connection: StoreConnection
    /// Which receivers want which webhook events (see `WebhookEvents.swift`).
    var webhookRouting: WebhookRouting { get }
    /// One write transaction: committed when `body` returns, rolled back when it
    /// throws, and run again by the engine's own rules (PostgreSQL's deadlock and
    /// serialization victims), so `body` must do nothing but statements.
    func writing<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (Connection) async throws -> T) async throws(StoreError) -> T
    /// One read-only snapshot: every statement in `body` sees the same committed
    /// state, and none waits for a writer.
    func reading<T: Sendable>(_ doing: String,
                              _ body: @escaping @Sendable (Connection) async throws -> T) async throws(StoreError) -> T
}
