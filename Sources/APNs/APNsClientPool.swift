import Synchronization

/// Several apps' credentials in one sender: one `APNsClient` per provider key (team
/// and key id) or client certificate, made on first use, so that no connection ever
/// carries two keys. APNs binds a connection to the key of its first push: another
/// key on it is refused (403 UnrelatedKeyIdInToken), another team's too (403
/// InvalidProviderToken). Each client keeps its own connections per environment,
/// so connections are, in effect, keyed by (environment, team, key id).
///
/// ```swift
/// let pool = APNsClientPool(configuration: .init(credentials: appA, environment: .production))
/// let a = try await pool.send(noteForA, to: tokenA, credentials: appA)
/// let b = try await pool.send(noteForB, to: tokenB, credentials: appB)   // its own connection
/// await pool.shutdown()
/// ```
public final class APNsClientPool: Sendable {
    /// What every client is made with; its credentials are replaced by each send's.
    public let configuration: APNsClient.Configuration
    /// The clients made so far; `closed` once shutdown began (then none is made).
    private let state = Mutex<State>(State())

    private struct State {
        var clients: [Identity: APNsClient] = [:]
        var closed = false
    }

    /// Which client a send goes through. A second, different key under the same team
    /// and key id is not told apart: the first one given for that pair is used.
    private enum Identity: Hashable {
        case token(teamID: String, keyID: String)
        case certificate(ObjectIdentifier)

        init(_ credentials: Credentials) {
            switch credentials {
            case .token(let t): self = .token(teamID: t.teamID, keyID: t.keyID)
            case .certificate(let c): self = .certificate(ObjectIdentifier(c))
            }
        }
    }

    /// A pool whose clients are made with `configuration`, each with the credentials
    /// of the send that first needs it. Makes no client and opens no connection.
    public init(configuration: APNsClient.Configuration) {

        self.configuration = configuration
    }

    /// The client for these credentials, made (and its first provider token signed)
    /// on first use.
    public func client(for credentials: Credentials) throws(APNsError) -> APNsClient {
        let identity = Identity(credentials)
        return try state.withLock { (s: inout State) throws(APNsError) -> APNsClient in
            guard !s.closed else { throw .shutDown }
            if let client = s.clients[identity] { return client }
            var configuration = configuration
            configuration.credentials = credentials
            let client = try APNsClient(configuration: configuration)
            s.clients[identity] = client
            return client
        }
    }

    /// Sends with these credentials, over their own connections.
    public func send(_ notification: Notification, to token: String, credentials: Credentials,
                     environment: Environment? = nil) async throws(APNsError) -> DeliveryResult {
        try await client(for: credentials).send(notification, to: token, environment: environment)
    }

    /// Every client made so far.
    public var all: [APNsClient] { state.withLock { Array($0.clients.values) } }

    /// Shuts every client down (each waits for its requests in flight); no client is
    /// made afterwards.
    public func shutdown() async {
        let clients = state.withLock { s -> [APNsClient] in
            if s.closed { return [] }
            s.closed = true
            return Array(s.clients.values)
        }
        for client in clients { await client.shutdown() }
    }
}
