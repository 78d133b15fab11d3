import Foundation
import Logging
import Synchronization
import PostgresNIO
import _ConnectionPoolModule

/// The store on a PostgreSQL database shared by several apns-server instances: the
/// database is also the queue. Workers claim with `FOR UPDATE SKIP LOCKED` under a
/// lease (the pattern of River, Oban, Solid Queue), so no delivery is held by two
/// workers at once, and an instance that dies leaves claims that expire.
///
/// The pool (postgres-nio's `PostgresClient`) runs in a task this store owns until
/// `close()`. When the server goes away the pool reconnects on demand: a call waits
/// for a connection (a restart costs the calls made meanwhile a few seconds), and
/// fails with one line naming HOST:PORT once no connection could be made for a
/// minute. `migrate()` connects on its own, so a wrong URL fails at start-up at once.
///
/// The store's policy is written once for both engines (`StoreEngine`, one file per
/// concern in `Sources/Store`); this folder is PostgreSQL's driver: the pool and its
/// transactions (`PostgresTransaction`), the bulk writes of a fan-out, the claim and
/// the finish (`PostgresOutbox.swift`), the schema's steps (`PostgresMigrations.swift`)
/// and LISTEN/NOTIFY (`PostgresWakeups.swift`).
public final class PostgresStore: DeliveryStore {
    public let configuration: Configuration
    let client: PostgresClient
    let wakeups: PostgresWakeups
    /// Which receivers want which webhook events (see `WebhookEvents.swift`).
    let webhookRouting = WebhookRouting()
    private let running: Task<Void, Never>

    /// The channel an enqueue notifies and idle workers LISTEN on.
    static let workChannel = "apns_outbox"

    /// Rows per multi-row INSERT or UPDATE (binds stay far below the protocol's 65,535).
    static let rowsPerStatement = 1_000

    /// Connects lazily: nothing is sent until the first call.
    public init(_ configuration: Configuration) {
        self.configuration = configuration
        let client = PostgresClient(configuration: configuration.client, backgroundLogger: Self.quiet)
        self.client = client
        running = Task { await client.run() }
        wakeups = PostgresWakeups(configuration)
    }

    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
    public convenience init(url: String) throws(StoreError) {
        let configuration = try Configuration(url: url)
        try configuration.checkTLS()
        self.init(configuration)
    }

    /// Ends the pool and the LISTEN connection; calls made after it fail.
    public func close() async {
        await wakeups.close()
        running.cancel()
        await running.value
    }

    deinit { running.cancel() }

    /// postgres-nio logs queries at debug level: nothing of ours goes to its log.
    static let quiet = Logger(label: "apns-store.postgres", factory: { _ in SwiftLogNoOpLogHandler() })

    // MARK: Statements, with errors as one line

    /// One statement in its own transaction (autocommit); its rows. On a leased
    /// connection of our own rather than `client.query`, for the guards of
    /// `PostgresConnection.bounded`.
    func rows(_ doing: String, _ query: PostgresQuery) async throws(StoreError) -> [PostgresRandomAccessRow] {
        do {
            return try await client.withConnection { connection in try await connection.rows(query) }
        } catch {
            throw StoreError(postgres: error, doing, configuration)
        }
    }

    /// One transaction on one pooled connection: committed when `body` returns,
    /// rolled back when it throws. A deadlock or serialization failure (the server
    /// chose this transaction as the victim) is run again, twice at most.
    func transaction<T: Sendable>(_ doing: String, begin: PostgresQuery = "BEGIN",
                                  _ body: @Sendable (PostgresConnection) async throws -> T) async throws(StoreError) -> T {
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await client.withConnection { connection in
                    try await connection.run(begin)
                    do {
                        let value = try await body(connection)
                        try await connection.run("COMMIT")
                        return value
                    } catch {
                        // On a lost connection this fails at once (the server has
                        // rolled back already).
                        try? await connection.run("ROLLBACK")
                        throw error
                    }
                }
            } catch let error as PSQLError where attempt < 3 && error.isTransient {
                continue
            } catch {
                throw StoreError(postgres: error, doing, configuration)
            }
        }
    }
}

extension PostgresConnection {
    /// A statement's rows, read whole. Every statement of the store goes through here.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
        try await bounded { try await self.query(query, logger: PostgresStore.quiet).collect().map { $0.makeRandomAccess() } }
    }

    /// A statement whose rows do not matter.
    func run(_ query: PostgresQuery) async throws {
        _ = try await rows(query)
    }

    /// How long a statement may go unanswered before its connection is given up. Ours
    /// take milliseconds (a lock wait lasts as long as another short transaction); a
    /// minute means the answer is not coming.
    static let statementDeadlineSeconds = 60

    /// `work`, one statement on this connection, failing with `ConnectionLost` where it
    /// would otherwise wait forever.
    ///
    /// postgres-nio (1.33) hands a statement to the connection's channel with no way to
    /// learn that the write was dropped: once the channel has closed and NIO has taken
    /// its handlers off, the statement's promise is never completed and the call never
    /// returns. The pool lends a connection the server has just closed until it hears
    /// of the close, so when the server restarts under load, a BEGIN (or a ROLLBACK after
    /// a failed statement) lands on one now and then, and its worker hangs for good,
    /// holding the lease.
    ///
    /// Three guards: a connection already closed fails at once (the usual case); a
    /// statement written in the moment between that check and the close fails two
    /// seconds after the close; and one a silent peer never answers (a half-open TCP
    /// connection) closes its connection after `statementDeadlineSeconds` (the pool
    /// drops it and connects anew) and fails. The caller sees "cannot reach
    /// PostgreSQL", which a worker retries. A dropped statement's task is left behind,
    /// waiting on nothing.
    func bounded<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard !isClosed else { throw ConnectionLost(reason: "the connection had closed") }
        let waiting = Waiting<T>()
        return try await withCheckedThrowingContinuation { continuation in
            waiting.continuation.withLock { $0 = continuation }
            // Once a second: a statement still unanswered two seconds after its
            // connection closed was dropped (one in the handler's hands fails at the
            // close); one unanswered on an open connection for the deadline is given up.
            let deadline = Task {
                var seconds = 0, closedFor = 0
                while closedFor < 2 && seconds < Self.statementDeadlineSeconds {
                    try await Task.sleep(for: .seconds(1))
                    seconds += 1
                    if self.isClosed { closedFor += 1 }
                }
                guard let continuation = waiting.take() else { return }
                if closedFor >= 2 {
                    continuation.resume(throwing: ConnectionLost(reason: "the connection closed"))
                } else {
                    let _: EventLoopFuture<Void> = self.close()
                    continuation.resume(throwing: ConnectionLost(reason: "no answer for \(seconds) s"))
                }
            }
            Task {
                let result: Result<T, any Error>
                do { result = .success(try await work()) } catch { result = .failure(error) }
                deadline.cancel()
                waiting.take()?.resume(with: result)
            }
        }
    }
}

/// The caller of `bounded`, resumed once: by the answer or by the deadline.
private final class Waiting<T: Sendable>: Sendable {
    let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)
    func take() -> CheckedContinuation<T, any Error>? { continuation.withLock { $0.take() } }
}

/// A statement sent on a connection that is gone, or that got no answer in time.
struct ConnectionLost: Error {
    let reason: String
}

extension PostgresRandomAccessRow {
    /// Column `index` as `T` (an Optional for a nullable column).
    func get<T: PostgresDecodable>(_ index: Int, _ type: T.Type = T.self) throws -> T {
        try self[index].decode(T.self)
    }
}

extension PSQLError {
    /// deadlock_detected, serialization_failure: worth running the transaction again.
    var isTransient: Bool {
        code == .server && ["40P01", "40001"].contains(serverInfo?[.sqlState] ?? "")
    }
}

extension StoreError {
    /// "enqueue notification n2: duplicate key value violates unique constraint …",
    /// "claim: cannot reach PostgreSQL at 127.0.0.1:5432: connection refused".
    /// postgres-nio hides its errors' text on purpose (it may hold data); the server's
    /// message and the socket's errno are what an operator needs, and neither holds
    /// the password.
    init(postgres error: any Error, _ doing: String, _ config: PostgresStore.Configuration) {
        let at = "PostgreSQL at \(config.endpoint)"
        switch error {
        case let error as StoreError:
            self = error
        case let error as ConnectionLost:
            self.init("\(doing): cannot reach \(at): \(error.reason)", temporary: true)
        case let error as PSQLError:
            switch error.code {
            case .server:
                let message = error.serverInfo?[.message] ?? "an error without a message"
                let state = error.serverInfo?[.sqlState] ?? ""
                // Who may connect where (28: authorization, 3D: no such database,
                // 08: connection, 57P: the server shutting down) is about the server,
                // not the statement: say which one.
                // Passing states: connection trouble, the server shutting down or
                // starting, out of connections or resources, a lock or a serialization
                // conflict that outlasted the retries.
                let temporary = ["08", "57P", "53", "55P03", "40001", "40P01"].contains(where: state.hasPrefix)
                if ["28", "3D", "08", "57"].contains(where: state.hasPrefix) {
                    self.init("\(doing): \(at): \(message)", temporary: temporary)
                } else {
                    self.init("\(doing): \(message)", temporary: temporary)
                }
            case .connectionError, .serverClosedConnection, .uncleanShutdown:
                self.init("\(doing): cannot reach \(at): \(Self.reason(error.underlying))", temporary: true)
            case .sslUnsupported:
                self.init("\(doing): \(at) does not offer TLS (sslmode=\(config.tls.rawValue); sslmode=disable in the URL connects without it)")
            case .authMechanismRequiresPassword:
                self.init("\(doing): \(at) asks for a password and the URL has none")
            case .poolClosed, .clientClosedConnection:
                self.init("\(doing): the store is closed")
            default:
                self.init("\(doing): \(at): \(error.code)")
            }
        case let error as ConnectionPoolError where error == .poolShutdown:
            self.init("\(doing): the store is closed")
        case let error as ConnectionPoolError where error == .connectionCreationCircuitBreakerTripped:
            self.init("\(doing): cannot reach \(at): no connection could be made for a minute", temporary: true)
        case let error as PostgresDecodingError:
            self.init("\(doing): column \(error.columnName) is not what this program expects (\(error.code))")
        default:
            self.init("\(doing): \(error)")
        }
    }

    /// Why a connection failed, as the socket said it: "connection refused".
    static func reason(_ error: (any Error)?) -> String {
        switch error {
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return reason(first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "cannot resolve \(error.host)" }
            return "no address to connect to"
        case let error as IOError:
            let text = String(cString: strerror(error.errnoCode))
            return text.prefix(1).lowercased() + text.dropFirst()
        case let error as NIOSSLError:
            // BoringSSL's reason, in its words: CERTIFICATE_VERIFY_FAILED and the like.
            let text = "\(error)"
            if text.contains("CERTIFICATE_VERIFY_FAILED") {
                return "TLS: the server's certificate is not signed by a trusted CA (see sslrootcert)"
            }
            return "TLS handshake failed: \(text)"
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return "TLS: the server's certificate does not name the host connected to (sslmode=verify-full)"
        case let error as ChannelError:
            if case .connectTimeout = error { return "no answer to the connection (timed out)" }
            return "\(error)"
        case nil:
            return "the server closed the connection"
        case let error?:
            return "\(error)"
        }
    }
}
