import APNs
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import Metrics
import Prometheus
import ServiceCore
import ServiceDelivery
import ServiceHTTP
import ServiceLifecycle
import ServiceWorkers
import Store

/// apns-server's start-up, as its executables run it: the configuration read,
/// checked (`--check-config`) or served. Global logging and metrics are the
/// executable's to set up, before `serve`.
public enum APNsServer {
    /// The variables that override the config file, for `--help`.
    public static let environmentHelp = """
        Environment variables override the file's values:
        \(ServerConfig.environmentVariables.map { "  \($0.name) (\($0.key))" }.joined(separator: "\n"))
        """

    /// The process's log: stderr at the config's level, as text or as JSON lines
    /// (`log_format`). For executables, once, before anything logs; the library itself
    /// never sets a process-wide handler. The returned logger, made by the same factory,
    /// is the one the service is handed; the process-wide one is for the libraries'
    /// own loggers (Hummingbird's, the engine's).
    public static func bootstrapLogging(_ config: ServerConfig) -> Logger {
        let factory = logHandlerFactory(config)
        LoggingSystem.bootstrap(factory)
        return Logger(label: "apns-server", factory: factory)
    }

    /// Handlers for `config`'s level and format.
    public static func logHandlerFactory(_ config: ServerConfig) -> @Sendable (String) -> any LogHandler {
        let level = Logger.Level(rawValue: config.logLevel) ?? .info
        if config.logFormat == "json" {
            return { label in JSONLogHandler(label: label, level: level) }
        }
        return { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }

    /// The process's metrics (the engine's `apns_*` included) in the registry that
    /// `/metrics` shows. For executables, once.
    public static func bootstrapMetrics() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }

    /// The configuration at `path` with the environment's overrides; nil after its
    /// one line on stderr.
    public static func loadConfig(path: String, environment: [String: String]) -> ServerConfig? {
        do {
            return try ServerConfig.load(path: path, environment: environment)
        } catch {
            _ = fail(error.description)
            return nil
        }
    }

    /// Runs until a signal, returns the exit status: 0 after a drain, 2 when the
    /// configuration (or the database it names) is unusable, 1 on a runtime failure.
    public static func serve(config: ServerConfig, dependencies: Dependencies, logger: Logger) async -> Int32 {
        for warning in config.warnings { logger.warning("\(warning)") }
        do {
            return try await run(buildApplication(configuration: config, dependencies: dependencies, logger: logger),
                                 logger: logger)
        } catch {
            return fail(error.description)
        }
    }

    private static func run(_ app: some ApplicationProtocol, logger: Logger) async -> Int32 {
        do {
            try await app.runService()
        } catch {
            logger.error("apns-server stopped: \(error)")
            return 1
        }
        logger.notice("apns-server stopped")
        return 0
    }

    /// What a start would refuse, found without serving: the database opened (and,
    /// PostgreSQL, connected to), the APNs keys loaded. Nothing is migrated; a new
    /// SQLite file is created empty, as a start would. 0, or 2 after the line a
    /// start would print.
    public static func check(config: ServerConfig, logger: Logger) async -> Int32 {
        for warning in config.warnings { logger.warning("\(warning)") }
        let store: any DeliveryStore
        do {
            store = try openStore(config.database)
        } catch {
            return fail("database \(config.database): \(error)")
        }
        do {
            try await store.checkConnection()
        } catch {
            await closeStore(store)
            return fail("database \(config.database): \(error)")
        }
        await closeStore(store)
        let clients: APNsClients
        do {
            clients = try APNsClients(config: config, logger: logger)
        } catch {
            return fail(error.description)
        }
        var refused: String?
        do {
            _ = try Broadcasts(config: config, clients: clients)
        } catch {
            refused = error.description
        }
        for client in clients.all { await client.shutdown() }
        if let refused { return fail(refused) }
        print("apns-server: config OK (\(config.apps.count) apps, database \(config.database))")
        return 0
    }

    /// The store the config names, by scheme: one service whichever it is.
    static func openStore(_ database: ServerConfig.Database) throws -> any DeliveryStore {
        try database.open()
    }

    static func closeStore(_ store: any DeliveryStore) async {
        await store.close()
    }

    static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("apns-server: \(message)\n".utf8))
        return 2
    }
}
