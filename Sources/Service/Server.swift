import APNs
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import Prometheus
import ServiceLifecycle
import Store

/// apns-server: the HTTP API, the outbox worker and the APNs clients, run as one
/// ServiceGroup. On SIGTERM (or SIGINT) the HTTP server stops taking requests
/// first, then the worker stops claiming and records what is in flight, then the
/// clients close their connections; the process exits 0.
public enum APNsServer {
    public static let usage = """
        usage: apns-server --config FILE.yaml

        Environment variables override the file's values:
        \(ServerConfig.environmentVariables.map { "  \($0.name) (\($0.key))" }.joined(separator: "\n"))
        """

    /// Runs until a signal, returns the exit status: 0 after a drain, 2 when the
    /// configuration (or the database it names) is unusable, 1 on a runtime failure.
    public static func main(arguments: [String], environment: [String: String]) async -> Int32 {
        // `apns-server store …`: the store's own commands (StoreCopyCommand.swift).
        if arguments.dropFirst().first == "store" { return await StoreCopyCommand.run(arguments: arguments) }
        var configPath: String?
        var rest = arguments.dropFirst()
        while let arg = rest.popFirst() {
            switch arg {
            case "-h", "--help":
                print(usage)
                return 0
            case "--config":
                guard let value = rest.popFirst() else { return fail("--config needs a file") }
                configPath = value
            case let a where a.hasPrefix("--config="):
                configPath = String(a.dropFirst("--config=".count))
            default:
                return fail("unknown argument '\(arg)'\n\(usage)")
            }
        }
        guard let configPath else { return fail("--config FILE.yaml is required\n\(usage)") }

        let config: ServerConfig
        do {
            config = try ServerConfig.load(path: configPath, environment: environment)
        } catch {
            return fail(error.description)
        }
        let level = Logger.Level(rawValue: config.logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "apns-server")
        for warning in config.warnings { logger.warning("\(warning)") }
        if let file = config.testClockFile {
            Clock.useTestClock(file: file)
            logger.warning("test clock: the time is read from \(file) (\(ServerConfig.testClockVariable)=1; never in production)")
        }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))

        let store: any DeliveryStore
        do {
            store = try openStore(config.database, fanOutPart: config.worker.fanOutPart)
        } catch {
            return fail("database \(config.database): \(error)")
        }
        // Whatever happens from here, the store is closed before the exit (PostgreSQL:
        // its pool and LISTEN connection end with a goodbye, not a reset).
        let status = await run(config: config, store: store, registry: registry, logger: logger)
        await closeStore(store)
        return status
    }

    /// Migrates, then serves until a signal; the exit status.
    static func run(config: ServerConfig, store: any DeliveryStore, registry: PrometheusCollectorRegistry,
                    logger: Logger) async -> Int32 {
        do {
            // Also where an unreachable PostgreSQL is found: one line, exit 2.
            try await store.migrate()
        } catch {
            return fail("database \(config.database): \(error)")
        }
        let clients: APNsClients
        do {
            clients = try APNsClients(config: config, logger: logger)
        } catch {
            return fail(error.description)
        }

        let metrics = ServiceMetrics(registry: registry, config: config)
        let wakeup = WorkerWakeup()
        // A shared outbox (several instances) spreads each notification over all of
        // them through their claims; handing it to this instance's loops would not.
        let handoff = store.sharedOutbox != nil || config.worker.handoffLimit == 0 ? nil
            : Handoff(batchSize: config.worker.batchSize, limit: config.worker.handoffLimit, wakeup: wakeup)
        let worker = OutboxWorker(config: config, store: store, clients: clients, metrics: metrics, wakeup: wakeup,
                                  handoff: handoff, logger: logger)
        let broadcasts: Broadcasts
        do {
            broadcasts = try Broadcasts(config: config, clients: clients)
        } catch {
            return fail(error.description)
        }
        let broadcastWakeup = WorkerWakeup()
        let broadcastWorker = BroadcastWorker(config: config, store: store, broadcasts: broadcasts,
                                              wakeup: broadcastWakeup, logger: logger)
        let pruner = LogPruner(config: config, store: store, metrics: metrics, logger: logger)
        let gauges = OutboxGauges(config: config, store: store, metrics: metrics, logger: logger)
        let router = makeRouter(config: config, store: store, metrics: metrics, wakeup: wakeup, handoff: handoff,
                                broadcasts: broadcasts, broadcastWakeup: broadcastWakeup)
        let connections = ConnectionLimits(perAddress: config.maxConnectionsPerAddress)
        let app = Application(
            router: router,
            server: GuardedHTTP1Channel.builder(limits: connections,
                                                requestTimeout: .seconds(Int64(config.requestTimeoutSeconds)),
                                                idleTimeout: .seconds(Int64(config.idleTimeoutSeconds))),
            configuration: .init(address: .hostname(config.listenHost, port: config.listenPort),
                                 availableConnectionsDelegate: MaximumAvailableConnections(config.maxConnections)),
            // Shut down in reverse: HTTP server, gauges, pruner, workers, clients.
            services: [clients, broadcastWorker, worker, pruner, gauges],
            onServerRunning: { channel in
                // On stdout whatever the log level, as apns-mock reports its port: with
                // `listen: HOST:0` this line is how a supervisor (or a test) learns it.
                let port = channel.localAddress?.port ?? config.listenPort
                FileHandle.standardOutput.write(Data("apns-server listening on \(config.listenHost):\(port)\n".utf8))
            },
            logger: logger)
        // Out of time to drain: the worker stops claiming, what APNs has not answered
        // ends unanswered (and goes back to the outbox), open connections close.
        let grace = ShutdownGrace(grace: .seconds(config.shutdownGraceSeconds), logger: logger) {
            worker.stop()
            for client in clients.all { client.abandon() }
            connections.closeAll()
        }
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: app), .init(service: grace, successTerminationBehavior: .ignore)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            logger.error("apns-server stopped: \(error)")
            return 1
        }
        logger.notice("apns-server stopped")
        return 0
    }

    static func makeRouter(config: ServerConfig, store: any DeliveryStore, metrics: ServiceMetrics,
                           wakeup: WorkerWakeup, handoff: Handoff? = nil, broadcasts: Broadcasts,
                           broadcastWakeup: WorkerWakeup) -> Router<ServiceContext> {
        let router = Router(context: ServiceContext.self)
        router.add(middleware: ErrorMiddleware())
        let auth = Auth(apiKeys: config.apiKeys, jwtSecret: config.userJWTSecret, jwtClaims: config.userJWTClaims)
        let body = BodyReader(limit: config.maxBodyBytes)
        OpsRoutes(metrics: metrics, auth: auth, metricsToken: config.metricsToken.map(MetricsToken.init))
            .register(on: router)
        UserRoutes(config: config, store: store, body: body, auth: auth).register(on: router)
        BackendRoutes(config: config, store: store, body: body, auth: auth,
                      fanOut: FanOut(config: config, store: store, metrics: metrics, handoff: handoff),
                      worker: wakeup).register(on: router)
        LiveActivityRoutes(config: config, store: store, body: body, auth: auth, worker: wakeup).register(on: router)
        ChannelRoutes(config: config, store: store, body: body, auth: auth, broadcasts: broadcasts,
                      worker: broadcastWakeup).register(on: router)
        return router
    }

    /// The store the config names, by scheme: one service whichever it is.
    static func openStore(_ database: ServerConfig.Database,
                          fanOutPart: Int = ServerConfig.WorkerConfig().fanOutPart) throws -> any DeliveryStore {
        try database.open(fanOutPart: fanOutPart)
    }

    static func closeStore(_ store: any DeliveryStore) async {
        await store.close()
    }

    static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("apns-server: \(message)\n".utf8))
        return 2
    }
}
