/// An outbox that other instances enqueue into, and that says when they did
/// (PostgreSQL's LISTEN/NOTIFY). A store offers one where several instances share
/// its database (`DeliveryStore.sharedOutbox`); where this process is the only
/// writer (SQLite), there is none, and its own enqueues wake its workers directly.
public protocol SharedOutbox: Sendable {
    /// True when an enqueue (by any instance) may have added work; false after
    /// `timeout` or on cancellation.
    func waitForWork(timeout: Duration) async -> Bool
}

extension SQLiteStore {
    /// One writer, this process: nobody else enqueues.
    public var sharedOutbox: (any SharedOutbox)? { nil }

    /// Nothing to end: the file closes when the store is released.
    public func close() async {}

    /// Opening the store opened the file: nothing more to prove.
    public func checkConnection() async throws(StoreError) {}
}

extension PostgresStore: SharedOutbox {
    public var sharedOutbox: (any SharedOutbox)? { self }
}
