import Foundation
import Testing
@testable import Store
import TestSupport

/// What the shared tests need of a store beyond `DeliveryStore`: a look inside
/// (`scalar`, the same SQL on both: `SELECT id FROM devices WHERE …`).
protocol TestStore: DeliveryStore {
    func scalar(_ sql: String) async throws(StoreError) -> Int64?
    /// Statements run as they are (SQL both stores take alike, or per store).
    func execute(_ sql: String) async throws(StoreError)
    /// The rows of one statement, each column as text (NULL as nil).
    func texts(_ sql: String) async throws(StoreError) -> [[String?]]
    /// The schema's first `last` steps only: a database as an older release left it.
    func migrate(through last: Int) async throws(StoreError)
}

extension SQLiteStore: TestStore {}
extension PostgresStore: TestStore {}

extension TestStore {
    /// The last schema step applied: SQLite's `user_version`, PostgreSQL's newest
    /// `schema_migrations` row.
    func schemaVersion() async throws -> Int64? {
        try await scalar(self is SQLiteStore ? "PRAGMA user_version" : "SELECT max(version) FROM schema_migrations")
    }
}

/// The stores a shared test runs on. The PostgreSQL case uses the suite's cluster
/// (`@Suite(.postgresCluster)`), a new database per test.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// A migrated store of `kind`, new and empty, for `body` only.
func withStore<T>(_ kind: StoreKind, _ body: (any TestStore) async throws -> T) async throws -> T {
    switch kind {
    case .sqlite:
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        return try await body(try await makeStore(scratch))
    case .postgres:
        return try await withPostgres { try await body($0) }
    }
}

/// A store of `kind` on a new database migrated through `step` only, as an older
/// release left it, for `body` only.
func withStore<T>(_ kind: StoreKind, migratedThrough step: Int,
                  _ body: (any TestStore) async throws -> T) async throws -> T {
    let store: any TestStore
    let scratch = Scratch()
    defer { withExtendedLifetime(scratch) {} }
    switch kind {
    case .sqlite: store = try SQLiteStore(path: scratch.path("old.db"))
    case .postgres: store = try PostgresStore(url: try await suiteCluster().newDatabase())
    }
    do {
        try await store.migrate(through: step)
        let result = try await body(store)
        await store.close()
        return result
    } catch {
        await store.close()
        throw error
    }
}

/// Several stores of `kind` on one new, migrated database (SQLite: one file), as
/// separate processes or instances would have them, for `body` only.
func withStore<T>(_ kind: StoreKind, instances: Int,
                  _ body: ([any TestStore]) async throws -> T) async throws -> T {
    switch kind {
    case .sqlite:
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let first = try await makeStore(scratch)
        // A long busy wait: on a loaded machine, instances racing for the one writer
        // wait longer than the default's few seconds, and that is no failure here.
        let others = try (1..<instances).map { _ in try SQLiteStore(path: first.path, busyTimeout: .seconds(30)) }
        return try await body([first] + others)
    case .postgres:
        return try await withPostgres(instances: instances) { try await body($0) }
    }
}

/// A migrated store on a fresh file in a scratch folder (removed with the Scratch).
func makeStore(_ scratch: Scratch, _ name: String = "apns.db") async throws -> SQLiteStore {
    let store = try SQLiteStore(path: scratch.path(name))
    try await store.migrate()
    return store
}

/// A distinct 64-hex-digit token for each `n`.
func token(_ n: Int) -> String {
    String(repeating: hexDigits(UInt64(0xabcd_0000 + n), count: 8), count: 8)
}

func registration(_ user: String, _ n: Int, app: String = "staff", platform: String = "ios",
                  company: String? = nil, environment: String = "production",
                  name: String? = nil) -> DeviceRegistration {
    DeviceRegistration(userID: user, companyID: company, token: token(n), platform: platform, appType: app,
                       deviceName: name, environment: environment)
}

/// Registers `user`'s token `n` and returns its device id.
@discardableResult
func register(_ store: some TestStore, _ user: String, _ n: Int, app: String = "staff", platform: String = "ios",
              company: String? = nil, now: Int64 = 1) async throws -> Int64 {
    try await store.register(registration(user, n, app: app, platform: platform, company: company), now: now)
    return try #require(try await store.scalar(
        "SELECT id FROM devices WHERE app_type = '\(app)' AND token = '\(token(n))'"))
}

/// Enqueues one notification `id` with one delivery per (user, device id) pair.
@discardableResult
func enqueue(_ store: some TestStore, _ id: String, _ targets: [(user: String, device: Int64)],
             now: Int64 = 1) async throws -> [NewDelivery] {
    let deliveries = targets.enumerated().map { i, target in
        NewDelivery(userID: target.user, deviceID: target.device, token: token(Int(target.device)),
                    environment: "production", apnsID: "\(id)-\(i)",
                    payload: Array(#"{"aps":{"alert":"\#(id) \#(i)"}}"#.utf8))
    }
    try await store.enqueue(NewNotification(id: id, type: "order_created", entityType: "order", entityID: "o-\(id)",
                                            appType: "staff"), deliveries, now: now)
    return deliveries
}

/// Registers u1's token 1, enqueues notification "n" to it (delivery "n-0") and
/// claims that for worker "w" at 10 with a 1 s lease; its delivery id.
func claimOneToARegisteredDevice(_ store: some TestStore) async throws -> Int64 {
    let device = try await register(store, "u1", 1)
    try await enqueue(store, "n", [("u1", device)])
    return try #require(try await store.claim(worker: "w", limit: 1, leaseMillis: 1_000, now: 10).first?.id)
}

/// `count` deliveries of one notification, to made-up devices (the outbox does not check them).
func enqueueMany(_ store: some TestStore, _ id: String, count: Int, now: Int64 = 1) async throws {
    try await enqueue(store, id, (0..<count).map { (user: "u\($0 % 50)", device: Int64($0)) }, now: now)
}

func delivered(_ id: Int64, status: Int = 200, at time: Int64 = 5, attempts: Int = 1,
               _ change: DeliveryOutcome.TokenChange? = nil) -> DeliveryOutcome {
    DeliveryOutcome(deliveryID: id, delivered: status == 200, status: status,
                    reason: status == 200 ? nil : "Unregistered", timestamp: time, attempts: attempts,
                    tokenChange: change)
}
