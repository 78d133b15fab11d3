import APNs
import Logging
import ServiceCore
import ServiceLifecycle

/// One `APNsClient` per distinct credentials and endpoints (apps that share a key
/// share a client, and so its connections: one per environment). A service of its
/// own, listed before the worker: the group shuts services down in reverse order,
/// so the clients close only after the worker has finished what it sent.
package final class APNsClients: Service, Sendable {
    package let byApp: [String: APNsClient]
    package let all: [APNsClient]

    package init(config: ServerConfig, logger: Logger) throws(ConfigError) {
        var byKey: [String: APNsClient] = [:]
        var byApp: [String: APNsClient] = [:]
        var all: [APNsClient] = []
        for app in config.apps {
            if let client = byKey[app.clientKey] {
                byApp[app.appType] = client
                continue
            }
            let configuration = APNsClient.Configuration(
                credentials: app.credentials, environment: .production, caFile: app.caFile, logger: logger,
                sandboxEndpoint: app.sandboxEndpoint, productionEndpoint: app.productionEndpoint)
            do {
                let client = try APNsClient(configuration: configuration)
                byKey[app.clientKey] = client
                byApp[app.appType] = client
                all.append(client)
            } catch {
                throw ConfigError("config: app \(app.appType): \(error)")
            }
        }
        self.byApp = byApp
        self.all = all
    }

    package func run() async throws {
        try? await gracefulShutdown()
        // Every request in flight gets its answer before the connections close.
        for client in all { await client.shutdown() }
    }
}
