import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceCore
import ServiceDelivery
import ServiceHTTP
import ServiceLifecycle
import ServiceWorkers
import Store

/// Why the application cannot start: one line (after "apns-server: "), exit 2.
public struct StartupFailure: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// apns-server as a value: the HTTP API, the outbox and broadcast workers, the
/// pruner, the gauges and the APNs clients, with the store migrated before it is
/// returned. Run it (`runService()`) to serve until a signal; drive its router in
/// a test (`app.test(.router)`) without a socket.
///
/// On SIGTERM (or SIGINT) the HTTP server stops taking requests first, then the
/// workers stop claiming and record what is in flight, then the clients close their
/// connections, then the store closes.
public func buildApplication(configuration config: ServerConfig, dependencies: Dependencies = Dependencies(),
                             logger: Logger = Logger(label: "apns-server")) async throws(StartupFailure)
    -> some ApplicationProtocol {
    let opened: (any DeliveryStore)?
    if dependencies.store == nil {
        do {
            opened = try APNsServer.openStore(config.database)
        } catch {
            throw StartupFailure("database \(config.database): \(error)")
        }
    } else {
        opened = nil
    }
    guard let store = dependencies.store ?? opened else { preconditionFailure("a store is opened or handed in") }
    do {
        return try await assemble(config: config, store: store, closesStore: opened != nil,
                                  dependencies: dependencies, logger: logger)
    } catch {
        if let opened { await APNsServer.closeStore(opened) }
        throw error
    }
}

private func assemble(config: ServerConfig, store: any DeliveryStore, closesStore: Bool,
                      dependencies: Dependencies, logger: Logger) async throws(StartupFailure) -> APNsApplication {
    do {
        // Also where an unreachable PostgreSQL is found: one line, exit 2.
        try await store.migrate()
    } catch {
        throw StartupFailure("database \(config.database): \(error)")
    }
    let clock = dependencies.clock
    // A fan-out whose process died while planning sent nothing and never answered:
    // what it wrote goes (see `FanOut`). This process is SQLite's only writer, so
    // every plan there is a dead one; on a shared database, only those whose planner
    // stopped moving their mark on (the pruner looks again later).
    do {
        let discarded = try await store.discardPlans(before: store.sharedOutbox == nil ? .max : clock.nowMillis)
        if discarded > 0 { logger.warning("unfinished fan-outs discarded", metadata: ["notifications": "\(discarded)"]) }
    } catch {
        throw StartupFailure("database \(config.database): \(error)")
    }
    let clients: APNsClients
    let broadcasts: Broadcasts
    do {
        clients = try APNsClients(config: config, logger: logger)
        broadcasts = try Broadcasts(config: config, clients: clients)
    } catch {
        throw StartupFailure(error.description)
    }

    let metrics = ServiceMetrics(registry: dependencies.metrics, config: config)
    let wakeup = WorkerWakeup()
    // A shared outbox (several instances) spreads each notification over all of
    // them through their claims; handing it to this instance's loops would not.
    let handoff = store.sharedOutbox != nil || config.worker.handoffLimit == 0 ? nil
        : Handoff(batchSize: config.worker.batchSize, limit: config.worker.handoffLimit, wakeup: wakeup)
    let worker = OutboxWorker(config: config, store: store, clock: clock, clients: clients, metrics: metrics,
                              wakeup: wakeup, handoff: handoff, logger: logger)
    let broadcastWakeup = WorkerWakeup()
    let broadcastWorker = BroadcastWorker(config: config.worker, store: store, clock: clock, broadcasts: broadcasts,
                                          wakeup: broadcastWakeup, logger: logger)
    let scheduler = ScheduleWorker(config: config, store: store, clock: clock, metrics: metrics, outbox: wakeup,
                                   logger: logger)
    let pruner = LogPruner(retention: config.retention, idempotencyRetentionHours: config.idempotencyRetentionHours,
                           store: store, clock: clock, metrics: metrics, logger: logger)
    let gauges = OutboxGauges(refreshMillis: config.metricsRefreshMillis, store: store, clock: clock, metrics: metrics, logger: logger)
    // Before any request or worker runs: the events a finish writes depend on it.
    store.routeWebhooks(config.webhooks.routes)
    let webhooks = WebhookWorker(config: config, store: store, clock: clock, metrics: metrics, logger: logger)
    let router = APIRouter.make(config: config, store: store, clock: clock, metrics: metrics, wakeup: wakeup,
                                handoff: handoff, broadcasts: broadcasts, broadcastWakeup: broadcastWakeup)
    let connections = ConnectionLimits(perAddress: config.maxConnectionsPerAddress)
    // Shut down in reverse: HTTP server, gauges, pruner, workers, clients, store.
    let services: [any Service] = (closesStore ? [StoreService(store: store)] : [])
        + [webhooks, clients, broadcastWorker, worker, scheduler, pruner, gauges]
    let app = Application(
        router: router,
        server: GuardedHTTP1Channel.builder(limits: connections,
                                            requestTimeout: .seconds(Int64(config.requestTimeoutSeconds)),
                                            idleTimeout: .seconds(Int64(config.idleTimeoutSeconds))),
        configuration: .init(address: .hostname(config.listenHost, port: config.listenPort),
                             availableConnectionsDelegate: MaximumAvailableConnections(config.maxConnections)),
        services: services,
        onServerRunning: { channel in
            // On stdout whatever the log level, as apns-mock reports its port: with
            // `listen: HOST:0` this line is how a supervisor (or a test) learns it.
            let port = channel.localAddress?.port ?? config.listenPort
            FileHandle.standardOutput.write(Data("apns-server listening on \(config.listenHost):\(port)\n".utf8))
        },
        logger: logger)
    // Out of time to drain: the worker stops claiming, what APNs has not answered
    // ends unanswered (and goes back to the outbox), webhook sends in flight end
    // (and go again later), open connections close.
    let grace = ShutdownGrace(grace: .seconds(config.shutdownGraceSeconds),
                              writeBack: .seconds(config.shutdownWriteBackSeconds), logger: logger) {
        worker.stop()
        webhooks.stop()
        for client in clients.all { client.abandon() }
        connections.closeAll()
    }
    return APNsApplication(inner: app, grace: grace, routes: router.routes.map { "\($0.method) \($0.path)" })
}

/// Hummingbird's application with the shutdown's deadline beside it. The grace
/// must hear the signal before the HTTP server starts its drain (which it bounds),
/// so it runs in a group around the application rather than among its services.
struct APNsApplication: ApplicationProtocol {
    typealias Responder = RouterResponder<ServiceContext>
    let inner: Application<Responder>
    let grace: ShutdownGrace
    /// What the router serves, "METHOD /path/:parameter" each (what `OpenAPITests`
    /// holds the document to).
    let routes: [String]

    var responder: Responder { get async throws { inner.responder } }
    var server: HTTPServerBuilder { inner.server }
    var eventLoopGroup: any EventLoopGroup { inner.eventLoopGroup }
    var configuration: ApplicationConfiguration { inner.configuration }
    var logger: Logger { inner.logger }
    var services: [any Service] { inner.services }
    var processesRunBeforeServerStart: [@Sendable () async throws -> Void] { inner.processesRunBeforeServerStart }
    @Sendable func onServerRunning(_ channel: any Channel) async { await inner.onServerRunning(channel) }

    func run() async throws {
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: inner), .init(service: grace, successTerminationBehavior: .ignore)],
            logger: logger))
        try await group.run()
    }
}

/// The store the application opened, closed once everything listed after it has
/// stopped (PostgreSQL: its pool and LISTEN connection end with a goodbye, not a reset).
struct StoreService: Service {
    let store: any DeliveryStore

    func run() async throws {
        try? await gracefulShutdown()
        await APNsServer.closeStore(store)
    }
}
