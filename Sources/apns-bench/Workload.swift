import APNs
import Foundation
import Histogram
import Synchronization

/// One benchmark run: a client with the chosen transport, connections and streams,
/// sending to `count` distinct tokens: one notification as a batch, read as fast as
/// results come, or (`callers`) per-event single sends, each with its own payload,
/// from that many concurrent callers, or (`messageBatch`) batches of `Message<Int>`
/// as apns-server's outbox worker sends them.
struct Workload: Sendable {
    let count: Int
    let credentials: Credentials
    let notification: APNs.Notification
    let transport: Transport
    let connections: Int
    let streams: Int
    let callers: Int?
    let messageBatch: Int?
    /// Where the one-batch loop runs.
    let loop: Loop
    let topic: String

    /// Where a batch's `for await` loop runs: in a task of its own, or on the main
    /// actor, as the README's example does in a `main.swift`.
    enum Loop: String, Sendable, CaseIterable {
        case task, main
    }

    /// The payload scripts/bench.sh gives h2load: a 231-byte alert, compact.
    static let defaultPayload = #"{"aps":{"alert":{"title":"Order update","body":"\#(String(repeating: "x", count: 150))"},"sound":"default"},"id":12345}"#

    init(count: Int, keys: KeyMaterial, payloadPath: String?, transport: Transport,
         connections: Int, streams: Int, callers: Int?, messageBatch: Int?, loop: Loop = .task) throws {
        self.count = count
        credentials = try Credentials(key: SigningKey(contentsOf: keys.providerKey), keyID: keys.keyID,
                                      teamID: keys.teamID)
        let json = try payloadPath.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
            ?? Data(Workload.defaultPayload.utf8)
        notification = try APNs.Notification(topic: keys.topic, payload: Payload(json: json))
        self.transport = transport
        self.connections = connections
        self.streams = streams
        self.callers = callers
        self.messageBatch = messageBatch
        self.loop = loop
        topic = keys.topic
    }

    func run(against target: Target) async throws -> Report {
        let client = try APNsClient(configuration: .init(
            credentials: credentials, environment: target.environment, caFile: target.caFile,
            transport: transport, connections: connections, maxInFlight: streams))
        // Latency in microseconds, up to a minute (the request deadline is 30 s).
        var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000)
        var statuses: [Int: Int] = [:]
        var firstError: String?

        let before = ProcessUsage.now()
        let clock = ContinuousClock()
        let start = clock.now
        if let callers {
            let tally = await singles(client, callers: callers)
            latency.add(tally.latency)
            statuses = tally.statuses
            firstError = tally.firstError
        } else if let messageBatch {
            let tally = await messages(client, batch: messageBatch, environment: target.environment)
            latency.add(tally.latency)
            statuses = tally.statuses
            firstError = tally.firstError
        } else {
            let notification = self.notification, count = self.count
            let figures = switch loop {
            case .main:
                await Workload.batchOnMainActor(client, notification, count: count)
            case .task:
                await Task.detached { await Workload.read(client.send(notification, to: SyntheticTokens(count: count))) }
                    .value
            }
            latency.add(figures.latency)
            statuses = figures.statuses
            firstError = figures.firstError
        }
        let elapsed = clock.now - start
        let after = ProcessUsage.now()
        // Timed apart: closing is not sending, but a slow close is a finding of its own.
        let closing = clock.now
        await client.shutdown()
        let shutdown = clock.now - closing

        return Report(
            requests: count, transport: transport.rawValue, connections: connections, streams: streams,
            payloadBytes: notification.payload.count,
            loop: callers == nil && messageBatch == nil ? loop.rawValue : nil, seconds: elapsed.seconds,
            shutdownSeconds: shutdown.seconds, statuses: statuses, firstError: firstError, latency: latency,
            userSeconds: after.userSeconds - before.userSeconds,
            systemSeconds: after.systemSeconds - before.systemSeconds,
            peakRSS: after.peakRSS, statistics: client.statistics,
            mockConnectionsAccepted: target.mock.map { Int($0.statistics().connectionsAccepted) },
            mockWarmHeaderBytes: target.mock?.statistics().warmHeaderBytesPerRequest)
    }
}

extension Workload {
    /// The README's loop as a `main.swift` runs it: top-level code is on the main actor.
    @MainActor
    static func batchOnMainActor(_ client: APNsClient, _ notification: APNs.Notification,
                                 count: Int) async -> Tally.Figures {
        await read(client.send(notification, to: SyntheticTokens(count: count)))
    }

    /// One batch's results, counted where the caller runs.
    nonisolated(nonsending) static func read(_ results: DeliveryResults) async -> Tally.Figures {
        var f = Tally.Figures()
        for await result in results {
            f.statuses[result.status, default: 0] += 1
            if result.attempts > 0 { _ = f.latency.record(UInt64(result.latency.microseconds)) }
            if f.firstError == nil, !result.isDelivered {
                f.firstError = result.error ?? result.reason?.rawValue ?? "status \(result.status)"
            }
        }
        return f
    }

    /// What the callers saw, shared: one histogram for all of them (one each would
    /// cost ~145 KB a caller, which at 20,000 callers is the benchmark measuring itself).
    final class Tally: Sendable {
        struct Figures {
            var latency = Histogram<UInt64>(highestTrackableValue: 60_000_000)
            var statuses: [Int: Int] = [:]
            var firstError: String?
        }

        let figures = Mutex(Figures())

        func record(_ result: DeliveryResult) {
            figures.withLock { f in
                f.statuses[result.status, default: 0] += 1
                if result.attempts > 0 { _ = f.latency.record(UInt64(result.latency.microseconds)) }
                if f.firstError == nil, !result.isDelivered {
                    f.firstError = result.error ?? result.reason?.rawValue ?? "status \(result.status)"
                }
            }
        }
    }

    /// `callers` tasks, each sending one notification at a time, as a backend does
    /// per event, until `count` are sent. Every send builds its own payload (the
    /// order number differs), so no two requests share a message.
    private func singles(_ client: APNsClient, callers: Int) async -> Tally.Figures {
        let next = Sequencer(), tally = Tally()
        let topic = self.topic, count = self.count
        // Unstructured tasks, as a server's request handlers are: one task group of
        // 20,000 children costs O(n) per finished child in Swift's runtime
        // (TaskGroup::removeChildTask was 18% of a 20k-caller profile).
        let tasks = (0..<callers).map { _ in
            Task {
                while true {
                    let i = next.take()
                    guard i <= count else { break }
                    let json = #"{"aps":{"alert":{"title":"Order update","body":"Order #\#(i) is ready for collection"},"sound":"default"},"id":\#(i)}"#
                    do {
                        let note = try APNs.Notification(topic: topic, payload: Payload(json: json))
                        tally.record(try await client.send(note, to: SyntheticTokens.token(UInt64(i))))
                    } catch {
                        tally.record(DeliveryResult(token: "", apnsID: nil, status: 0, reason: nil, attempts: 0,
                                                    error: "\(error)"))
                    }
                }
            }
        }
        for task in tasks { await task.value }
        return tally.figures.withLock { $0 }
    }
}

extension Workload {
    /// Batches of up to 3 in flight, as the outbox worker keeps its claims ahead of its
    /// answers: each an array of messages with one shared notification, the token's
    /// environment and apns-id given, and the message's index as its context, which
    /// every result is checked against (its token must be the one sent at that index).
    private func messages(_ client: APNsClient, batch size: Int, environment: Environment) async -> Tally.Figures {
        let tally = Tally(), count = self.count, notification = self.notification
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for start in stride(from: 1, through: count, by: size) {
                if inFlight == 3 {
                    await group.next()
                    inFlight -= 1
                }
                let batch = (start..<min(start + size, count + 1)).enumerated().map { k, i in
                    Message(token: SyntheticTokens.token(UInt64(i)), notification: notification,
                            environment: environment, apnsID: Workload.apnsID(UInt64(i)), context: k)
                }
                inFlight += 1
                group.addTask {
                    for await r in client.send(batch) {
                        guard batch.indices.contains(r.context), batch[r.context].token == r.result.token else {
                            tally.record(DeliveryResult(token: r.result.token, apnsID: nil, status: 0, reason: nil,
                                                        attempts: 0, error: "result carried the wrong context \(r.context)"))
                            continue
                        }
                        tally.record(r.result)
                    }
                }
            }
        }
        return tally.figures.withLock { $0 }
    }

    /// A canonical (lower-case) apns-id per index, as an outbox stores them.
    static func apnsID(_ index: UInt64) -> String {
        String(unsafeUninitializedCapacity: 36) { out in
            let hex: StaticString = "0123456789abcdef"
            let fixed: StaticString = "00000000-0000-4000-8000-"
            for k in 0..<24 { out[k] = fixed.utf8Start[k] }
            for k in 0..<12 { out[24 + k] = hex.utf8Start[Int((index >> UInt64(44 - 4 * k)) & 0xF)] }
            return 36
        }
    }
}

/// Hands out 1, 2, 3, ... to concurrent callers.
private final class Sequencer: Sendable {
    private let counter = Atomic<Int>(0)
    func take() -> Int { counter.add(1, ordering: .relaxed).newValue }
}

extension Duration {
    var microseconds: Int64 {
        let (s, atto) = components
        return s * 1_000_000 + atto / 1_000_000_000_000
    }

    var seconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }
}
