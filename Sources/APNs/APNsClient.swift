import CAPNs
import Logging
import Synchronization

/// Sends notifications to APNs: one HTTP/2 connection (or `connections`) per
/// environment it sends to, one provider token per connection, and one engine
/// that every kind of send goes through: a single call, a broadcast to a token
/// list, a stream of messages each with its own payload.
///
/// ```swift
/// let client = try APNsClient(configuration: .init(credentials: creds, environment: .production))
/// let result = try await client.send(notification, to: token)                 // one event, one device
/// for await r in client.send(notification, to: tokens) { ... }                // a broadcast
/// for await r in client.send(messages) { r.result; r.context }                // a payload per token
/// await client.shutdown()
/// ```
public final class APNsClient: Sendable {
    /// What the client was made with: credentials, environments, transport, limits, retries.
    public let configuration: Configuration
    let dispatcher: Dispatcher
    let metrics = ClientMetrics()
    private let shutDown = Atomic<Bool>(false)

    /// Checks the credentials by signing a first provider token; connects on the first send.
    public init(configuration: Configuration) throws(APNsError) {
        self.configuration = configuration
        dispatcher = try Dispatcher(configuration: configuration, metrics: metrics)
        do {
            _ = try dispatcher.defaultLane.providerToken.current()
        } catch {
            throw .signing(error.description)
        }
    }

    /// Sends to one token and returns its final result (after any retries). Waits
    /// for room when the client's window is full; cancelled while waiting, it is
    /// not sent (status 0); cancelled in flight, its real answer is still returned.
    public func send(_ notification: Notification, to token: String,
                     environment: Environment? = nil) async throws(APNsError) -> DeliveryResult {
        guard !isShutDown else { throw .shutDown }
        guard let device = DeviceToken(token) else {
            let result = DeliveryResult(token: token.trimmingSpaces, apnsID: nil, status: 0, reason: .badDeviceToken,
                                        attempts: 0, error: "not 64 to 200 hex digits (even count)")
            metrics.record(result)
            return result
        }
        let lane = try dispatcher.lane(for: environment)
        let pending = Lane.NotificationSend(token: device.hex, notification: notification)
        // Lane.send(_:) inlined by hand: one async frame less for each suspended caller
        // keeps it inside the task's first allocator slab (a kilobyte each at 20,000).
        let id = lane.nextCallerID()
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { lane.enter(pending, caller: id, $0) }
        } onCancel: {
            lane.cancel(caller: id)
        }
    }

    /// Sends to every token and streams one result per token, in completion order.
    /// Malformed tokens get a local result (status 0, `.badDeviceToken`) and are never
    /// sent. Memory stays bounded by the window however many tokens there are:
    /// tokens are read only as results are consumed.
    public func send<Tokens: Sequence>(_ notification: Notification, to tokens: Tokens,
                                       environment: Environment? = nil) -> DeliveryResults
    where Tokens.Element: StringProtocol {
        DeliveryResults { [self] in
            var iterator = tokens.makeIterator()
            // One C message for the whole batch; every request holds a reference.
            let shared = notification.makeCMessage()
            let release = ReleaseOnDeinit(shared)
            return Batch(client: self, source: .sync {
                guard let token = iterator.next() else { return nil }
                _ = release
                capns_message_retain(shared)
                return Outgoing(token: String(token), message: shared, environment: environment,
                                apnsID: nil, context: ())
            })
        }
    }

    /// `send(_:to:environment:)` with the tokens from a closure (nil at the end),
    /// for a caller in another module of this package: there the generic version runs
    /// unspecialized, and each token cost a metadata lookup and calls through witnesses.
    package func send(_ notification: Notification, nextToken: @escaping () -> String?,
                      environment: Environment? = nil) -> DeliveryResults {
        DeliveryResults { [self] in
            let shared = notification.makeCMessage()
            let release = ReleaseOnDeinit(shared)
            return Batch(client: self, source: .sync {
                guard let token = nextToken() else { return nil }
                _ = release
                capns_message_retain(shared)
                return Outgoing(token: token, message: shared, environment: environment, apnsID: nil, context: ())
            })
        }
    }

    /// An executor on the sender thread of `environment`'s connection (nil: the
    /// default), for a caller in this package that consumes a batch there
    /// (`SenderExecutor` says what its jobs must not do).
    package func senderExecutor(for environment: Environment? = nil) throws(APNsError) -> any TaskExecutor {
        SenderExecutor(lane: try dispatcher.lane(for: environment))
    }

    /// Sends each message (its own token, payload, headers and environment) and
    /// streams one result per message, with the message's context, in completion
    /// order. Messages are read only as results are consumed.
    @_specialize(where Messages == [Message<Int>], Context == Int)   // see Batch.init
    public func send<Messages: Sequence, Context>(_ messages: Messages) -> MessageResults<Context>
    where Messages.Element == Message<Context> {
        MessageResults { [self] in
            var iterator = messages.makeIterator()
            let cache = CMessageCache()
            return Batch(client: self, source: .sync {
                iterator.next().map { Outgoing($0, message: cache.message(for: $0.notification)) }
            })
        }
    }

    /// The same for messages that arrive over time (an `AsyncStream` of events):
    /// they are sent as they come, at most a window ahead of the results consumed.
    public func send<Messages: AsyncSequence & Sendable, Context>(_ messages: Messages) -> MessageResults<Context>
    where Messages.Element == Message<Context>, Messages.Failure == Never {
        MessageResults { [self] in
            let feed = AsyncFeed<Context>(capacity: configuration.maxInFlight) { feed in
                let cache = CMessageCache()
                for await message in messages {
                    if Task.isCancelled { break }
                    if await !feed.put(Outgoing(message, message: cache.message(for: message.notification))) { break }
                }
            }
            return Batch(client: self, source: .async(feed))
        }
    }

    /// Sends to every token and collects the results (one per token).
    public func sendAll<Tokens: Sequence>(_ notification: Notification, to tokens: Tokens,
                                          environment: Environment? = nil) async -> [DeliveryResult]
    where Tokens.Element: StringProtocol {
        var results: [DeliveryResult] = []
        for await result in send(notification, to: tokens, environment: environment) { results.append(result) }
        return results
    }

    /// Waits for every request in flight to be answered (retries included), then
    /// closes the connections. Sends started afterwards end at once: a single send
    /// throws `.shutDown`, a batch's remaining messages end with status 0 and that error.
    public func shutdown() async {
        if shutDown.exchange(true, ordering: .acquiringAndReleasing) { return }
        await dispatcher.shutdown()
    }

    /// Shuts down without waiting: requests in flight end at once with status 0 (no
    /// answer), as do sends started afterwards. For a process out of time to drain
    /// (its caller gives the unanswered ones back to be sent again); a `shutdown()`
    /// still waiting returns once they have ended.
    public func abandon() {
        shutDown.store(true, ordering: .releasing)
        dispatcher.abandon()
    }

    var isShutDown: Bool { shutDown.load(ordering: .acquiring) }

    /// Over every environment's connections.
    public var statistics: Statistics {
        Statistics(dispatcher.lanes.map(\.statistics),
                   signatures: dispatcher.lanes.reduce(0) { $0 + $1.providerToken.signatureCount })
    }
}

extension Outgoing {
    /// Takes over one reference to `cMessage`, the C copy of the message's notification.
    init(_ message: Message<Context>, message cMessage: OpaquePointer) {
        self.init(token: message.token, message: cMessage, environment: message.environment,
                  apnsID: message.apnsID, context: message.context)
    }
}

/// The C message of the last notification a batch's input carried, reused while the
/// next message's notification is equal: a fan-out of one notification to many
/// devices (apns-server's outbox worker sends its batches so) copies the payload
/// into C once, not once per message, and frees it once. Distinct payloads cost
/// one comparison each, which fails at the first differing field or byte.
/// Belongs to the one task that reads the input.
final class CMessageCache {
    private var last: (notification: Notification, message: OpaquePointer)?

    deinit {
        if let last { capns_message_release(last.message) }
    }

    /// One reference for the caller.
    func message(for notification: Notification) -> OpaquePointer {
        if let last, last.notification == notification {
            capns_message_retain(last.message)
            return last.message
        }
        let made = notification.makeCMessage()   // the caller's reference
        capns_message_retain(made)               // the cache's own
        if let last { capns_message_release(last.message) }
        last = (notification, made)
        return made
    }
}

/// Drops the batch's reference to its shared C message when the batch's input goes.
private final class ReleaseOnDeinit: @unchecked Sendable {
    let message: OpaquePointer
    init(_ message: OpaquePointer) { self.message = message }
    deinit { capns_message_release(message) }
}

/// What the transport did so far, summed over every connection of a client
/// (`APNsClient.statistics`).
public struct Statistics: Sendable, Hashable {
    /// HTTP/2 connections opened, reconnections included.
    public let connectionsOpened: Int
    /// Connections closed by the server or by an error while in use.
    public let connectionsLost: Int
    /// GOAWAY frames received: APNs closing a connection, gracefully or not.
    public let goawaysReceived: Int
    /// Requests handed to a connection, each retry counted again.
    public let requestsStarted: Int
    /// Requests the server did not act on (GOAWAY, REFUSED_STREAM, a lost connection):
    /// sent again without counting against the retry policy's attempts.
    public let notProcessed: Int
    /// Of `notProcessed`: lost with a reset or a dropped connection before any answer;
    /// APNs may have acted on them, so a resend can deliver twice.
    public let lostInFlight: Int
    /// Attempts that got no answer within `requestTimeout`.
    public let timedOut: Int
    /// Bytes written to the connections.
    public let bytesSent: Int
    /// Bytes read from the connections.

    public let bytesReceived: Int

    /// The server's latest SETTINGS_MAX_CONCURRENT_STREAMS (0 before any).
    public let serverMaxStreams: Int
    /// Most streams in flight at once on one connection.
    public let peakStreams: Int
    /// Provider JWTs signed.
    public let jwtSignatures: Int

    // Clamped: a counter glitch in C must never crash the process reading it.
    init(_ lanes: [capns_sender_stats], signatures: Int) {
        func sum(_ field: (capns_sender_stats) -> UInt64) -> Int {
            lanes.reduce(0) { $0 &+ Int(clamping: field($1)) }
        }
        connectionsOpened = sum(\.connections_opened)
        connectionsLost = sum(\.connections_lost)
        goawaysReceived = sum(\.goaways_received)
        requestsStarted = sum(\.requests_started)
        notProcessed = sum(\.not_processed)
        lostInFlight = sum(\.lost_in_flight)
        timedOut = sum(\.timed_out)
        bytesSent = sum(\.bytes_sent)
        bytesReceived = sum(\.bytes_received)
        serverMaxStreams = lanes.map { Int(clamping: $0.server_max_streams) }.max() ?? 0
        peakStreams = lanes.map { Int(clamping: $0.peak_streams) }.max() ?? 0
        jwtSignatures = signatures
    }
}
