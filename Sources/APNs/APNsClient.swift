import CAPNs
import Logging
import Synchronization

/// Sends notifications to APNs over one set of HTTP/2 connections (one by default)
/// to one environment, signing one provider token for them.
///
/// ```swift
/// let client = try APNsClient(configuration: .init(credentials: creds, environment: .production))
/// for await result in client.send(notification, to: tokens) { ... }   // one result per token
/// await client.shutdown()
/// ```
public final class APNsClient: Sendable {
    public let configuration: Configuration
    let router = Router()
    let connection: Connection
    let providerToken: ProviderToken
    let metrics = ClientMetrics()
    private let shutDown = Atomic<Bool>(false)

    /// Checks the credentials by signing a first provider token; connects on the first send.
    public init(configuration: Configuration) throws(APNsError) {
        self.configuration = configuration
        let connection = try Connection(configuration: configuration, router: router)
        self.connection = connection
        providerToken = ProviderToken(credentials: configuration.credentials) { jwt in
            connection.setAuthorization(jwt)
        }
        do {
            _ = try providerToken.current()
        } catch {
            throw .signing(error.description)
        }
    }

    /// Sends to every token and streams one result per token, in completion order.
    /// Malformed tokens get a local result (status 0, `.badDeviceToken`) and are never
    /// sent. Memory stays bounded by the in-flight window however many tokens there are:
    /// tokens are read only as results are consumed.
    public func send<Tokens: Sequence>(_ notification: Notification, to tokens: Tokens) -> DeliveryResults
    where Tokens.Element: StringProtocol {
        var iterator = tokens.makeIterator()
        return DeliveryResults(client: self, notification: notification,
                               tokens: AnyIterator { iterator.next().map { String($0) } })
    }

    /// Sends to one token.
    public func send(_ notification: Notification, to token: String) async throws(APNsError) -> DeliveryResult {
        guard !isShutDown else { throw .shutDown }
        let one: AnyIterator<String> = AnyIterator(CollectionOfOne(token).makeIterator())
        let driver = BatchDriver(client: self, notification: notification, tokens: one)
        return await driver.next()!
    }

    /// Sends to every token and collects the results (one per token).
    public func sendAll<Tokens: Sequence>(_ notification: Notification, to tokens: Tokens) async -> [DeliveryResult]
    where Tokens.Element: StringProtocol {
        var results: [DeliveryResult] = []
        for await result in send(notification, to: tokens) { results.append(result) }
        return results
    }

    /// Waits for every request in flight to be answered, then closes the connections.
    /// Sends started afterwards end at once with status 0.
    public func shutdown() async {
        if shutDown.exchange(true, ordering: .acquiringAndReleasing) { return }
        await router.drained()
        connection.destroy()
    }

    var isShutDown: Bool { shutDown.load(ordering: .acquiring) }

    public var statistics: Statistics {
        Statistics(connection.statistics(), signatures: providerToken.signatureCount)
    }

    func record(_ result: DeliveryResult) {
        if result.isDelivered {
            metrics.delivered.increment()
        } else {
            metrics.failed(result.reason?.rawValue ?? (result.status == 0 ? "NoAnswer" : "\(result.status)")).increment()
        }
        if result.attempts > 0 { metrics.latency.record(duration: result.latency) }
    }
}

/// The results of one batch, as an async sequence: one per token, as they complete.
public struct DeliveryResults: AsyncSequence {
    public typealias Element = DeliveryResult
    let client: APNsClient
    let notification: Notification
    let tokens: AnyIterator<String>

    public func makeAsyncIterator() -> Iterator {
        Iterator(driver: BatchDriver(client: client, notification: notification, tokens: tokens))
    }

    public struct Iterator: AsyncIteratorProtocol {
        let driver: BatchDriver

        public mutating func next() async -> DeliveryResult? {
            await driver.next()
        }
    }
}

/// What the transport did so far.
public struct Statistics: Sendable, Hashable {
    public let connectionsOpened: Int
    public let connectionsLost: Int
    public let goawaysReceived: Int
    public let requestsStarted: Int
    public let notProcessed: Int
    public let timedOut: Int
    public let bytesSent: Int
    public let bytesReceived: Int
    /// The server's latest SETTINGS_MAX_CONCURRENT_STREAMS (0 before any).
    public let serverMaxStreams: Int
    /// Most streams in flight at once on one connection.
    public let peakStreams: Int
    /// Provider JWTs signed.
    public let jwtSignatures: Int

    // Clamped: a counter glitch in C must never crash the process reading it.
    init(_ s: capns_sender_stats, signatures: Int) {
        connectionsOpened = Int(clamping: s.connections_opened)
        connectionsLost = Int(clamping: s.connections_lost)
        goawaysReceived = Int(clamping: s.goaways_received)
        requestsStarted = Int(clamping: s.requests_started)
        notProcessed = Int(clamping: s.not_processed)
        timedOut = Int(clamping: s.timed_out)
        bytesSent = Int(clamping: s.bytes_sent)
        bytesReceived = Int(clamping: s.bytes_received)
        serverMaxStreams = Int(clamping: s.server_max_streams)
        peakStreams = Int(clamping: s.peak_streams)
        jwtSignatures = signatures
    }
}
