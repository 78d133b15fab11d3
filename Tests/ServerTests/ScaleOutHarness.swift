import APNsMock
import Foundation
import Store
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Several apns-server processes on one throw-away PostgreSQL database. Each
/// instance sends to a mock of its own, so a mock's record is exactly what one
/// instance sent; the mocks' clocks are one (CLOCK_MONOTONIC), so sends on two
/// instances can be compared in time. The test reads the database through a
/// PostgresStore of its own.
final class ScaleOut: @unchecked Sendable {
    let cluster: PostgresCluster
    let url: String
    let mocks: [MockServer]
    let servers: [ServerProcess]
    /// The test's own view of the database (closed by `stop`).
    let store: PostgresStore
    static let company = "scale"

    /// The cluster is this one's alone only when the test restarts it (`ownCluster`):
    /// otherwise the instances get a new, empty database on the test process's
    /// shared one, and race to migrate it as they would in production.
    let ownsCluster: Bool

    /// `tweak` sets up each instance's mock, given the instance's index.
    init(instances: Int, options: ServerProcess.Options = ServerProcess.Options(),
         ownCluster: Bool = false,
         mock tweak: (Int, inout MockConfiguration) -> Void = { _, _ in }) async throws {
        ownsCluster = ownCluster
        cluster = ownCluster ? try await PostgresCluster.make() : try await PostgresCluster.shared()
        do {
            url = try await cluster.newDatabase()
            mocks = try (0..<instances).map { i in try Harness.mock(sandbox: false) { tweak(i, &$0) } }
        } catch {
            if ownCluster { cluster.stop() }
            throw error
        }
        var options = options
        options.database = url
        servers = mocks.map { ServerProcess(sandbox: nil, production: $0, options: options) }
        store = PostgresStore(try PostgresStore.Configuration(url: url))
    }

    /// Runs `body` on `instances` instances, started, then stops everything (`stop`),
    /// whatever `body` did; on a failure, each instance's stderr is printed first.
    /// Returns the exit statuses of the instances still running at the end.
    @discardableResult
    static func run(instances: Int, options: ServerProcess.Options = ServerProcess.Options(),
                    ownCluster: Bool = false,
                    mock tweak: (Int, inout MockConfiguration) -> Void = { _, _ in },
                    _ body: (ScaleOut) async throws -> Void) async throws -> [Int32] {
        let scale = try await ScaleOut(instances: instances, options: options, ownCluster: ownCluster, mock: tweak)
        do {
            try await scale.startAll()
            try await body(scale)
        } catch {
            for server in scale.servers { print(server.stderr) }
            await scale.stop()
            throw error
        }
        return await scale.stop()
    }

    /// Starts every instance at once (the migrations race each other) and returns
    /// once all listen.
    func startAll() async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for server in servers { group.addTask { try await server.start() } }
            try await group.waitForAll()
        }
    }

    /// SIGTERM to those still running (their exit statuses), then the mocks, the
    /// test's store and the cluster if it is this one's.
    @discardableResult
    func stop() async -> [Int32] {
        var statuses: [Int32] = []
        for server in servers where server.isRunning { statuses.append(await server.stop()) }
        await store.close()
        for mock in mocks { mock.stop() }
        if ownsCluster { await cluster.stopOffPool() }
        return statuses
    }

    /// `count` devices of company `company`, one user each, registered 250 a request,
    /// the requests spread over the instances; their tokens.
    func seed(_ count: Int, seed: Int) async throws -> [String] {
        let tokens = Harness.tokens(count, seed: seed)
        let chunks = stride(from: 0, to: count, by: 250).map { $0..<min($0 + 250, count) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (n, chunk) in chunks.enumerated() {
                let server = servers[n % servers.count]
                let body = chunk.map {
                    #"{"user_id":"u\#(seed)-\#($0)","company_id":"\#(Self.company)","deviceToken":"\#(tokens[$0])","platform":"ios","appType":"staff"}"#
                }.joined(separator: ",")
                group.addTask {
                    let r = await server.backend("POST", "/v1/device-tokens", #"{"devices":[\#(body)]}"#)
                    guard r.status == 200 else { throw ScaleOutError("seeding: \(r.status) \(r.body)") }
                }
            }
            try await group.waitForAll()
        }
        return tokens
    }

    /// One notification to every device of the company, through `server`; its id.
    func notifyCompany(through server: ServerProcess) async throws -> String {
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"order_status_changed","entity_type":"order","entity_id":"o1","app_type":"staff","company_id":"\#(Self.company)","alert":{"title":"t","body":"b"}}"#)
        guard r.status == 202, let id = r.json["notification_id"] as? String else {
            throw ScaleOutError("notify: \(r.status) \(r.body)")
        }
        return id
    }

    /// Waits for a state that lasts, checking every 50 ms; throws after `timeout`
    /// seconds (generous: the machine is loaded) saying what it waited for.
    func wait(_ what: String, timeout: TimeInterval = 600, until condition: () async throws -> Bool) async throws {
        let end = Date().addingTimeInterval(timeout)
        while try await !condition() {
            guard Date() < end else { throw ScaleOutError("gave up after \(Int(timeout)) s waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Waits until nothing is pending in the outbox; a store error (the database
    /// restarting) counts as not yet.
    func drained(timeout: TimeInterval = 600) async throws {
        try await wait("an empty outbox", timeout: timeout) { (try? await store.outboxDepth()) == 0 }
    }

    /// Requests the mocks received so far, all together.
    var requestsReceived: Int { mocks.reduce(0) { $0 + Int($1.statistics().requests) } }

    /// Every delivery of a notification, a page at a time, and its counts by state.
    func log(_ id: String) async throws -> (deliveries: [DeliveryView], counts: [String: Int]) {
        var all: [DeliveryView] = []
        var after: Int64?
        var counts: [String: Int] = [:]
        repeat {
            let page = try #require(try await store.notification(id: id, limit: 5000, after: after))
            all += page.deliveries
            counts = page.counts
            after = page.next
        } while after != nil
        return (all, counts)
    }

    /// Each instance's sends: apns-id → when the mock received them (every attempt).
    func sends() -> [[String: [Duration]]] {
        mocks.map { mock in
            var byID: [String: [Duration]] = [:]
            for r in mock.recordedRequests() {
                if let id = r.header("apns-id") { byID[id.lowercased(), default: []].append(r.received) }
            }
            return byID
        }
    }

    /// Now on the mocks' clock.
    static func monotonicNow() -> Duration {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return .seconds(ts.tv_sec) + .nanoseconds(ts.tv_nsec)
    }
}

struct ScaleOutError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
