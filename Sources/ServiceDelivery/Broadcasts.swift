import APNs
import Foundation
import ServiceCore
import Store
import Synchronization

/// One `BroadcastClient` per app and environment, on the app's `APNsClient` (its
/// key, its connections, its retries) and its management endpoint
/// (`broadcast_management_endpoint`, `broadcast_sandbox_management_endpoint`;
/// Apple's when absent). Made at start: the management connection opens on the
/// first call.
package final class Broadcasts: Sendable {
    private let clients: [String: BroadcastClient]
    /// Channel creation per key, one at a time in this process, so that two requests
    /// for the same entity do not both create a channel on APNs (`addChannel`
    /// settles a race between processes).
    private let creating = Mutex<Set<ChannelKey>>([])

    package init(config: ServerConfig, clients: APNsClients) throws(ConfigError) {
        var made: [String: BroadcastClient] = [:]
        for app in config.apps {
            guard let client = clients.byApp[app.appType] else { continue }
            for (environment, endpoint) in [(Environment.production, app.broadcastManagementEndpoint),
                                            (.sandbox, app.broadcastSandboxManagementEndpoint)] {
                do {
                    made[Self.key(app.appType, environment.name)] = try BroadcastClient(
                        client: client, bundleID: app.topic, environment: environment, managementEndpoint: endpoint)
                } catch {
                    throw ConfigError("config: app \(app.appType): broadcast channels: \(error)")
                }
            }
        }
        self.clients = made
    }

    package func client(appType: String, environment: String) -> BroadcastClient? {
        clients[Self.key(appType, environment)]
    }

    private static func key(_ appType: String, _ environment: String) -> String { appType + "\u{0}" + environment }

    /// Runs `body` while no other creation for `key` runs in this process.
    package func creatingChannel<T: Sendable>(_ key: ChannelKey, _ body: () async throws -> T) async throws -> T {
        while !creating.withLock({ $0.insert(key).inserted }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        defer { _ = creating.withLock { $0.remove(key) } }
        return try await body()
    }
}

extension Environment {
    /// "sandbox" or "production", as the store and the API spell it.
    var name: String { self == .sandbox ? "sandbox" : "production" }
}
