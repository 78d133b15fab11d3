import GRDB

/// The webhook records (`WebhookEvents.swift`) for the policies that still run on
/// GRDB's own `Database` (the outbox's finish): each runs the one written over
/// `StoreConnection`, on this connection, inside its transaction.
extension SQLiteStore {
    static func recordFailedDeliveries(_ db: Database, _ routes: WebhookRoutes, ids: [Int64], now: Int64) throws {
        nonisolated(unsafe) let c = SQLiteTransaction(db: db)
        try runToEnd { try await recordFailedDeliveries(c, routes, ids: ids, now: now) }
    }

    static func recordDeactivation(_ db: Database, _ routes: WebhookRoutes, deviceID: Int64, apnsTimestamp: Int64?,
                                   now: Int64) throws {
        nonisolated(unsafe) let c = SQLiteTransaction(db: db)
        try runToEnd { try await recordDeactivation(c, routes, deviceID: deviceID, apnsTimestamp: apnsTimestamp, now: now) }
    }

    static func recordCompletionChecks(_ db: Database, _ routes: WebhookRoutes, ids: [Int64], now: Int64) throws {
        nonisolated(unsafe) let c = SQLiteTransaction(db: db)
        try runToEnd { try await recordCompletionChecks(c, routes, ids: ids, now: now) }
    }
}
