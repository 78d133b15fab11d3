import CAPNs
import Dispatch
import FoundationEssentials
import Glibc

/// Broadcast push (iOS 18) for one app: its channels (create, read, delete, list)
/// and sends to a channel. Sends go through the client's engine (its connection
/// for the environment, its provider token, its retries); management calls go to
/// APNs' management host over a connection of their own (`capns_manager`), signed
/// with the same provider token.
///
/// ```swift
/// let broadcasts = try BroadcastClient(client: client, bundleID: "com.example.app")
/// let channel = await broadcasts.createChannel(storagePolicy: .noMessageStored)
/// let result = await broadcasts.send(update, on: channel.channelID!)
/// ```
public final class BroadcastClient: Sendable {
    /// The app whose channels these are, as in the management paths and the `apns-topic` of sends.
    public let bundleID: String
    /// Where broadcasts are sent, and whose management host is used by default.
    public let environment: Environment
    /// Where management calls go.
    public let managementEndpoint: Endpoint
    private let client: APNsClient
    private let manager: Manager

    /// Apple's management hosts: production port 2196, sandbox 2195. A custom
    /// environment (a mock) serves management on its own host and port.
    public static func managementEndpoint(for environment: Environment) -> Endpoint {
        switch environment {
        case .production: Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
        case .sandbox: Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)
        case .custom(let host, let port): Endpoint(host: host, port: port)
        }
    }

    /// `environment` nil: the client's; `managementEndpoint` nil: Apple's for it.
    public init(client: APNsClient, bundleID: String, environment: Environment? = nil,
                managementEndpoint: Endpoint? = nil) throws(APNsError) {
        let bundle = bundleID.trimmingSpaces
        guard !bundle.isEmpty, bundle.utf8.count <= Int(CAPNS_BUNDLE_MAX), !bundle.contains("/"),
              Notification.isHeaderValue(bundle) else {
            throw .transport("bundle id '\(bundleID)' cannot name an app in a path")
        }
        self.bundleID = bundle
        self.client = client
        self.environment = environment ?? client.configuration.environment
        let endpoint = managementEndpoint ?? BroadcastClient.managementEndpoint(for: self.environment)
        self.managementEndpoint = endpoint
        manager = try Manager(endpoint: endpoint, configuration: client.configuration)
    }

    // MARK: - Channel management

    /// Creates a channel for Live Activity broadcasts (`POST /1/apps/<bundle id>/channels`).
    /// On success (201) the result's `channelID` is the new channel's id, which the app
    /// gives to ActivityKit and which `send(_:on:)` takes.
    public func createChannel(storagePolicy: MessageStoragePolicy) async -> ChannelResult {
        let body = #"{"message-storage-policy":\#(storagePolicy.rawValue),"push-type":"LiveActivity"}"#
        let answer = await call(.create, "POST", "/1/apps/\(bundleID)/channels", body: Array(body.utf8))
        guard answer.status == 201 else { return answer.result(.create) }
        guard let id = answer.channelID, isChannelID(id) else {
            return answer.result(.create, error: "APNs answered 201 without a usable apns-channel-id")
        }
        return answer.result(.create, channelID: id)
    }

    /// Reads a channel's settings; on success (200) the result's `storagePolicy` is the
    /// channel's. A malformed id gets a local result and is never sent.
    public func readChannel(_ channelID: String) async -> ChannelResult {
        if let bad = local(.read, channelID) { return bad }
        let answer = await call(.read, "GET", "/1/apps/\(bundleID)/channels", channelID: channelID)
        guard answer.status == 200 else { return answer.result(.read, channelID: channelID) }
        guard let raw = answer.decoded(ChannelBody.self)?.storagePolicy,
              let policy = MessageStoragePolicy(rawValue: raw) else {
            return answer.result(.read, channelID: channelID, error: "APNs answered 200 without a message-storage-policy")
        }
        return answer.result(.read, channelID: channelID, storagePolicy: policy)
    }

    /// Deletes a channel (204 on success). A malformed id gets a local result and is never sent.
    public func deleteChannel(_ channelID: String) async -> ChannelResult {
        if let bad = local(.delete, channelID) { return bad }
        return await call(.delete, "DELETE", "/1/apps/\(bundleID)/channels", channelID: channelID)
            .result(.delete, channelID: channelID)
    }

    /// Lists the app's channels in this environment; on success (200) the result's
    /// `channelIDs` holds them.
    public func listChannels() async -> ChannelResult {

        let answer = await call(.list, "GET", "/1/apps/\(bundleID)/all-channels")
        guard answer.status == 200 else { return answer.result(.list) }
        guard let ids = answer.decoded(ChannelListBody.self)?.channels else {
            return answer.result(.list, error: "APNs answered 200 without a channels list")
        }
        return answer.result(.list, channelIDs: ids)
    }

    // MARK: - Sending

    /// Sends to every device subscribed to the channel and returns the final answer
    /// (after the engine's retries). `apnsID` is the request's `apns-request-id`
    /// (ours, echoed by APNs); `uniqueID` its `apns-unique-id`. A malformed channel
    /// id gets a local result (status 0, `.badChannelId`) and is never sent.
    public func send(_ notification: BroadcastNotification, on channelID: String) async -> DeliveryResult {
        guard isChannelID(channelID) else {
            return DeliveryResult(token: "", apnsID: nil, status: 0, reason: .badChannelId, attempts: 0,
                                  error: "channel id '\(channelID)' is not base64 as APNs issues them")
        }
        guard !client.isShutDown else {
            return DeliveryResult(token: "", apnsID: nil, status: 0, reason: nil, attempts: 0,
                                  error: APNsError.shutDown.description)
        }
        guard let message = notification.makeCMessage(bundleID: bundleID, channelID: channelID) else {
            return DeliveryResult(token: "", apnsID: nil, status: 0, reason: nil, attempts: 0,
                                  error: errno == EINVAL ? "a header value was refused" : "out of memory")
        }
        do {
            let lane = try client.dispatcher.lane(for: environment)
            return await lane.send(Lane.MadeSend(token: "", message: message))
        } catch {
            capns_message_release(message)
            return DeliveryResult(token: "", apnsID: nil, status: 0, reason: nil, attempts: 0, error: "\(error)")
        }
    }

    // MARK: - One management call

    /// A channel id that cannot be right never leaves: one local result.
    private func local(_ op: ChannelResult.Operation, _ channelID: String) -> ChannelResult? {
        guard !isChannelID(channelID) else { return nil }
        return ChannelResult(operation: op, status: 0, reason: .badChannelId, channelID: channelID,
                             error: "channel id '\(channelID)' is not base64 as APNs issues them")
    }

    /// Signs with the lane's provider token; on 403 ExpiredProviderToken signs a
    /// new one once (the same generation rule as sends) and asks again.
    private func call(_ op: ChannelResult.Operation, _ method: String, _ path: String,
                      channelID: String? = nil, body: [UInt8]? = nil) async -> Manager.Answer {
        let token: ProviderToken
        do {
            token = try client.dispatcher.lane(for: environment).providerToken
        } catch {
            return .failed("\(error)")
        }
        var current: ProviderToken.Current
        do {
            current = try token.current()
        } catch {
            return .failed("\(error)")
        }
        let requestID = UUID().uuidString.lowercased()
        var answer = await manager.request(method, path, jwt: current.jwt, channelID: channelID,
                                           requestID: requestID, body: body)
        if answer.status == 403, answer.reason == .expiredProviderToken {
            do {
                current = try token.expired(generation: current.generation)
            } catch {
                return .failed("\(error)")
            }
            answer = await manager.request(method, path, jwt: current.jwt, channelID: channelID,
                                           requestID: requestID, body: body)
        }
        return answer
    }
}

/// The management connection: a `capns_manager` whose blocking calls run on a
/// queue of their own, never on the caller's (cooperative) thread.
private final class Manager: Sendable {
    nonisolated(unsafe) let handle: OpaquePointer     // capns_manager serializes its calls
    let queue = DispatchQueue(label: "apns.broadcast.manage")

    struct Answer: Sendable {
        var status = 0
        var reason: Reason?
        var requestID: String?
        var channelID: String?
        var body: [UInt8] = []
        var error: String?

        static func failed(_ why: String) -> Answer { Answer(error: why) }

        /// The body as `T`, nil when it is not that JSON.
        func decoded<T: Decodable>(_: T.Type) -> T? {
            try? JSONDecoder().decode(T.self, from: Data(body))
        }

        func result(_ op: ChannelResult.Operation, channelID: String? = nil, storagePolicy: MessageStoragePolicy? = nil,
                    channelIDs: [String]? = nil, error: String? = nil) -> ChannelResult {
            ChannelResult(operation: op, status: status, reason: reason, requestID: requestID,
                          channelID: channelID, storagePolicy: storagePolicy, channelIDs: channelIDs,
                          error: error ?? self.error)
        }
    }

    init(endpoint: Endpoint, configuration: APNsClient.Configuration) throws(APNsError) {
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let made = endpoint.host.withCString { host in
            withOptionalCString(configuration.caFile) { ca in
                var cfg = capns_manager_config(
                    host: host, port: UInt16(clamping: endpoint.port), ca_file: ca,
                    connect_timeout_ms: Int32(clamping: Manager.milliseconds(configuration.connectTimeout)),
                    request_timeout_ms: Int32(clamping: Manager.milliseconds(configuration.requestTimeout)))
                return capns_manager_create(&cfg, &err, err.count)
            }
        }
        guard let made else { throw .transport(String(cChars: err)) }
        handle = made
    }

    deinit { capns_manager_destroy(handle) }

    func request(_ method: String, _ path: String, jwt: String, channelID: String?, requestID: String,
                 body: [UInt8]?) async -> Answer {
        await withCheckedContinuation { (done: CheckedContinuation<Answer, Never>) in
            queue.async { [self] in
                done.resume(returning: perform(method, path, jwt: jwt, channelID: channelID,
                                               requestID: requestID, body: body))
            }
        }
    }

    private func perform(_ method: String, _ path: String, jwt: String, channelID: String?, requestID: String,
                         body: [UInt8]?) -> Answer {
        var out = capns_manager_response()
        defer { capns_manager_response_free(&out) }
        let rc = withOptionalCString(channelID) { channel in
            withOptionalBytes(body) { bytes, count in
                capns_manager_request(handle, method, path, jwt, channel, requestID, bytes, count, &out)
            }
        }
        var answer = Answer()
        answer.status = Int(out.status)
        answer.requestID = Manager.string(&out.request_id)
        answer.channelID = Manager.string(&out.channel_id)
        answer.reason = Manager.string(&out.reason).map(Reason.init(rawValue:))
        if rc != 0 { answer.error = Manager.string(&out.error) ?? "channel management request failed" }
        if let p = out.body { answer.body = Array(UnsafeRawBufferPointer(start: p, count: out.body_len)) }
        return answer
    }

    private static func string<T>(_ tuple: inout T) -> String? {
        withUnsafeBytes(of: &tuple) { raw -> String? in
            guard raw.first != 0 else { return nil }
            return String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    private static func milliseconds(_ d: Duration) -> Int64 {
        let (s, atto) = d.components
        return s * 1000 + atto / 1_000_000_000_000_000
    }
}

private func withOptionalBytes<R>(_ bytes: [UInt8]?, _ body: (UnsafePointer<UInt8>?, Int) -> R) -> R {
    guard let bytes else { return body(nil, 0) }
    return bytes.withUnsafeBufferPointer { body($0.baseAddress, $0.count) }
}

/// The bodies of APNs' channel answers that the client reads.
private struct ChannelBody: Decodable {
    let storagePolicy: Int
    enum CodingKeys: String, CodingKey { case storagePolicy = "message-storage-policy" }
}

private struct ChannelListBody: Decodable {
    let channels: [String]
}
