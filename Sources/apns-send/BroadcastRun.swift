import APNs
import Glibc

/// `--broadcast CHANNEL_ID PAYLOAD.json` and the channel management flags: one
/// request, one record (stdout or --output), exit 0 when APNs said yes, 1 when it
/// refused or did not answer, 2 for a usage, input or configuration problem.
enum BroadcastRun {
    enum Action {
        case send(channelID: String, notification: BroadcastNotification)
        case create(MessageStoragePolicy)
        case read(String)
        case delete(String)
        case list
    }

    static func main(_ o: Options) async -> Int32 {
        let action: Action
        let client: APNsClient
        let broadcasts: BroadcastClient
        do throws(UsageError) {
            action = try self.action(o)
            let sources = try SettingSources(o, environment: Settings.getenv)
            guard let topic = sources.value(o.topic, "APNS_TOPIC") else {
                throw UsageError("no topic: pass --topic BUNDLE_ID (the app whose channels these are)")
            }
            let endpoints = try Settings.endpoints(o, sources)
            let credentials = try NamedCredentials.token(o, sources).load()
            let configuration = try Settings.configuration(o, credentials: credentials, endpoints: endpoints)
            let management = try managementEndpoint(o, endpoints: endpoints)
            do throws(APNsError) {
                client = try APNsClient(configuration: configuration)
                // The bundle id names the app in the paths; a Live Activity topic works too.
                let bundle = topic.hasSuffix(PushType.liveactivity.topicSuffix)
                    ? String(topic.dropLast(PushType.liveactivity.topicSuffix.count)) : topic
                broadcasts = try BroadcastClient(client: client, bundleID: bundle, managementEndpoint: management)
            } catch {
                throw UsageError(error.description)
            }
        } catch {
            Stderr.line(error.message)
            return 2
        }
        let record = await run(action, broadcasts)
        await client.shutdown()
        guard write(record.line, to: o.output) else { return 2 }
        if let why = record.error { Stderr.line(why) }
        return record.ok ? 0 : 1
    }

    /// Exactly one action, with what it needs and nothing it does not take.
    private static func action(_ o: Options) throws(UsageError) -> Action {
        let chosen = [o.broadcast != nil, o.createChannel, o.readChannel != nil, o.deleteChannel != nil, o.listChannels]
            .filter { $0 }.count
        guard chosen == 1 else {
            throw UsageError(chosen == 0
                ? "--storage-policy and --management-endpoint go with --create-channel, --read-channel, --delete-channel or --list-channels"
                : "give one of --broadcast, --create-channel, --read-channel, --delete-channel, --list-channels")
        }
        if o.messages != nil || o.tokens != nil { throw UsageError("a broadcast goes to a channel: no TOKENS.txt or --messages") }
        if o.storagePolicy != nil, !o.createChannel { throw UsageError("--storage-policy goes with --create-channel") }
        if o.broadcast == nil, o.payload != nil { throw UsageError("PAYLOAD.json goes with --broadcast only") }
        if let channel = o.broadcast ?? o.readChannel ?? o.deleteChannel, !isChannelID(channel) {
            throw UsageError("channel id '\(channel)' is not base64 as APNs issues them")
        }
        if let channel = o.broadcast {
            guard let path = o.payload else { throw UsageError("missing PAYLOAD.json: --broadcast CHANNEL_ID PAYLOAD.json") }
            let payload = try Settings.payload(path)
            let priority = try o.priority.map { text throws(UsageError) in
                try Settings.choice(text, flag: "--priority", { Int($0).flatMap(Priority.init(rawValue:)) }, ["10", "5", "1"])
            }
            let expiration: Expiration = o.expiration.map { $0 == 0 ? .immediately : .at(unixSeconds: $0) } ?? .immediately
            do throws(BroadcastNotification.Error) {
                return .send(channelID: channel, notification: try BroadcastNotification(
                    priority: priority, expiration: expiration, payload: payload))
            } catch {
                throw UsageError(path, error.description)
            }
        }
        if o.createChannel {
            let text = o.storagePolicy ?? "0"
            guard let policy = Int(text).flatMap(MessageStoragePolicy.init(rawValue:)) else {
                throw UsageError("unknown --storage-policy '\(text)' (expected 0 or 1)")
            }
            return .create(policy)
        }
        if let id = o.readChannel { return .read(id) }
        if let id = o.deleteChannel { return .delete(id) }
        return .list
    }

    /// `--management-endpoint`, else `--endpoint` (a mock serves both on one port),
    /// else Apple's management host for the environment.
    private static func managementEndpoint(_ o: Options, endpoints: Endpoints) throws(UsageError) -> Endpoint? {
        if let text = o.managementEndpoint { return try Endpoint(flag: "--management-endpoint", text) }
        // `--endpoint` is --env's endpoint in `endpoints`, read and checked there.
        return o.endpoint == nil ? nil : endpoints[endpoints.environment]
    }

    struct Record {
        let line: String
        let ok: Bool
        let error: String?
    }

    private static func run(_ action: Action, _ b: BroadcastClient) async -> Record {
        switch action {
        case .send(let channel, let notification):
            let r = await b.send(notification, on: channel)
            var j = JSONLine()
            j.add("channel_id", channel)
            j.add("status", r.status)
            j.add("apns_request_id", r.apnsID)
            j.add("apns_unique_id", r.uniqueID)
            j.add("reason", r.reason?.rawValue)
            j.add("attempts", r.attempts)
            if let error = r.error { j.add("error", error) }
            return Record(line: j.text, ok: r.isDelivered, error: r.status == 0 ? r.error : nil)
        case .create(let policy): return record(await b.createChannel(storagePolicy: policy))
        case .read(let id): return record(await b.readChannel(id))
        case .delete(let id): return record(await b.deleteChannel(id))
        case .list: return record(await b.listChannels())
        }
    }

    private static func record(_ r: ChannelResult) -> Record {
        var j = JSONLine()
        j.add("operation", r.operation.rawValue)
        j.add("status", r.status)
        j.add("apns_request_id", r.requestID)
        j.add("channel_id", r.channelID)
        j.add("reason", r.reason?.rawValue)
        if let policy = r.storagePolicy { j.add("message_storage_policy", policy.rawValue) }
        if let ids = r.channelIDs { j.add("channels", ids) }
        if let error = r.error { j.add("error", error) }
        return Record(line: j.text, ok: r.isSuccess, error: r.error)
    }

    /// The record and a newline to --output (created or replaced) or stdout.
    private static func write(_ line: String, to path: String?) -> Bool {
        let fd = path.map { open($0, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) } ?? STDOUT_FILENO
        guard fd >= 0 else {
            Stderr.line("\(path ?? "stdout"): \(String(cString: strerror(errno)))")
            return false
        }
        defer { if path != nil { close(fd) } }
        var bytes = Array((line + "\n").utf8)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                Stderr.line("\(path ?? "stdout"): \(String(cString: strerror(errno)))")
                return false
            }
            off += n
        }
        return true
    }
}

/// One JSON object, keys in the order added; nil values are written as null.
private struct JSONLine {
    private var out: [UInt8] = [UInt8(ascii: "{")]

    private mutating func key(_ name: String) {
        if out.count > 1 { out.append(UInt8(ascii: ",")) }
        JSONValue.writeString(name, to: &out)
        out.append(UInt8(ascii: ":"))
    }

    mutating func add(_ name: String, _ value: String?) {
        key(name)
        if let value { JSONValue.writeString(value, to: &out) } else { out.append(contentsOf: "null".utf8) }
    }

    mutating func add(_ name: String, _ value: Int) {
        key(name)
        out.append(contentsOf: String(value).utf8)
    }

    mutating func add(_ name: String, _ values: [String]) {
        key(name)
        out.append(UInt8(ascii: "["))
        for (i, v) in values.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.writeString(v, to: &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    var text: String { String(decoding: out + [UInt8(ascii: "}")], as: UTF8.self) }
}
