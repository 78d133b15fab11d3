import PostgresNIO

/// The webhook records (`WebhookEvents.swift`) for the policies that still run on
/// PostgresNIO's own connection (the outbox's finish): each runs the one written over
/// `StoreConnection`, on this connection, in its transaction.
extension PostgresStore {
    static func recordFailedDeliveries(_ db: PostgresConnection, _ routes: WebhookRoutes, ids: [Int64],
                                       now: Int64) async throws {
        try await recordFailedDeliveries(PostgresTransaction(connection: db), routes, ids: ids, now: now)
    }

    static func recordDeactivation(_ db: PostgresConnection, _ routes: WebhookRoutes, deviceID: Int64,
                                   apnsTimestamp: Int64?, now: Int64) async throws {
        try await recordDeactivation(PostgresTransaction(connection: db), routes, deviceID: deviceID,
                                     apnsTimestamp: apnsTimestamp, now: now)
    }

    static func recordCompletionChecks(_ db: PostgresConnection, _ routes: WebhookRoutes, ids: [Int64],
                                       now: Int64) async throws {
        try await recordCompletionChecks(PostgresTransaction(connection: db), routes, ids: ids, now: now)
    }
}
