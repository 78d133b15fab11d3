import APNsMock
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Store
@testable import Service
@testable import ServiceCore

/// The HTTP API a server test talks to: the built binary as a child process
/// (`ServerProcess`), or the application in this process (`InProcessServer`).
/// The helpers the suites share take either.
protocol APIServer: AnyObject, Sendable {
    func send(_ method: String, _ path: String, body: String?, bearer: String?,
              headers: [(String, String)]) async -> HTTPResponse
    /// Waits until the outbox is empty (every delivery final).
    func drained(timeout: TimeInterval) async throws
    /// The server's SQLite file, opened beside it.
    func store() throws -> SQLiteStore
}

extension APIServer {
    func request(_ method: String, _ path: String, body: String? = nil, bearer: String? = nil,
                 headers: [(String, String)] = []) async -> HTTPResponse {
        await send(method, path, body: body, bearer: bearer, headers: headers)
    }

    func backend(_ method: String, _ path: String, _ body: String? = nil) async -> HTTPResponse {
        await request(method, path, body: body, bearer: Harness.apiKey)
    }

    /// `GET /metrics` with a credential it takes (an API key).
    func metrics() async -> HTTPResponse { await request("GET", "/metrics", bearer: Harness.apiKey) }

    func drained() async throws { try await drained(timeout: 180) }
}

extension ServerProcess: APIServer {}

/// apns-server as a value in this process (`buildApplication`), driven through its
/// router (HummingbirdTesting's `.router`): no socket, no child process, no port.
/// The config is the one a child process would read (`ServerProcess` writes it), the
/// store is a real SQLite file in the test's scratch folder (or a PostgreSQL database),
/// and "now" is the test's `FakeClock` when it moves time.
///
/// `.router` runs the application's services beside the test (the outbox and
/// broadcast workers, the pruner, the gauges, the APNs clients), so deliveries reach
/// the mocks as they do from the binary. `start()` runs that in a task the test
/// holds until `stop()`, so a test reads top-down as it does with a child process.
final class InProcessServer: APIServer, @unchecked Sendable {
    /// The config, scratch folder and database a child process would have (never started).
    let files: ServerProcess
    private let clock: any ServiceClock
    private var client: (any TestClientProtocol)?
    private var running: Task<Void, any Error>?
    private var opened: (any DeliveryStore)?
    private let done = AsyncStream<Void>.makeStream()
    /// The routes the application's router serves ("GET /v1/deliveries"), once started.
    private(set) var routes: [String] = []

    /// Served on a socket of its own (HummingbirdTesting's `.live`) rather than
    /// through the router alone: for a browser, which needs a port.
    private let live: Bool

    init(sandbox: MockServer?, production: MockServer?, options: ServerProcess.Options = ServerProcess.Options(),
         clock: any ServiceClock = SystemClock(), live: Bool = false) {
        files = ServerProcess(sandbox: sandbox, production: production, options: options)
        self.clock = clock
        self.live = live
    }

    /// The port a live server listens on (127.0.0.1); nil through the router.
    var port: Int? { client?.port }

    var databasePath: String { files.databasePath }
    /// Still serving: a trap in a handler would have ended this process, the test's
    /// own, so a test that gets here has its answer.
    var isRunning: Bool { running != nil }
    var configPath: String { files.configPath }

    /// Builds the application on the config and runs it (its services included)
    /// until `stop()`; returns once requests can be sent.
    func start() async throws {
        let config = try ServerConfig.load(path: files.configPath, environment: [:])
        var logger = Logger(label: "apns-server")
        logger.logLevel = Logger.Level(rawValue: config.logLevel) ?? .warning
        // The store is the test's: opened as the binary opens it, closed after the app.
        let store = try APNsServer.openStore(config.database)
        opened = store
        let app = try await buildApplication(configuration: config,
                                             dependencies: Dependencies(clock: clock, store: store),
                                             logger: logger)
        routes = (app as? APNsApplication)?.routes ?? []
        let (ready, handOut) = AsyncStream<any TestClientProtocol>.makeStream()
        let stopped = done.stream
        running = Task {
            defer { handOut.finish() }
            try await app.test(live ? .live : .router) { client in
                handOut.yield(client)
                for await _ in stopped {}
            }
        }
        for await client in ready {
            self.client = client
            return
        }
        // The application ended before it took requests: its error.
        try await running?.value
        throw StartError()
    }

    struct StartError: Error {}

    /// Stops the services (as on SIGTERM) and closes the store. The result is
    /// `ServerProcess.stop`'s shape: 0 once stopped cleanly.
    @discardableResult
    func stop() async -> Int32 {
        done.continuation.finish()
        var status: Int32 = 0
        do { try await running?.value } catch { status = 1 }
        running = nil
        if let opened { await APNsServer.closeStore(opened) }
        opened = nil
        return status
    }

    func send(_ method: String, _ path: String, body: String?, bearer: String?,
              headers: [(String, String)]) async -> HTTPResponse {
        guard let client else { return HTTPResponse(status: 0, headers: [], body: "not started") }
        // The headers the child process's client sends, less those of the socket.
        var fields = HTTPFields()
        for (name, value) in headers {
            if let name = HTTPField.Name(name) { fields.append(HTTPField(name: name, value: value)) }
        }
        if let bearer { fields[.authorization] = "Bearer \(bearer)" }
        if body != nil { fields[.contentType] = "application/json" }
        do {
            return try await client.execute(uri: path, method: HTTPRequest.Method(method) ?? .get,
                                            headers: fields, body: body.map { ByteBuffer(string: $0) }) { r in
                HTTPResponse(status: Int(r.status.code),
                             headers: r.headers.map { ($0.name.canonicalName, $0.value) },
                             body: String(buffer: r.body))
            }
        } catch {
            return HTTPResponse(status: 0, headers: [], body: "\(error)")
        }
    }

    func drained(timeout: TimeInterval) async throws { try await files.drained(timeout: timeout) }
    func store() throws -> SQLiteStore { try files.store() }

    deinit { done.continuation.finish() }
}
