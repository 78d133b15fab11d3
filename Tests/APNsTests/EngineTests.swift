import APNsMock
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import APNs

/// The event-driven engine (issue #9): every kind of send through one dispatcher,
/// a payload per token, both environments, against the real mock over real TLS.
@Suite struct EngineTests {
    /// A burst: 20,000 callers each send one notification at the same moment. The
    /// lane's table holds 2,000; the rest wait for a slot instead of allocating.
    @Test func aBurstOfTwentyThousandSingleSendsEndsWithOneResultEach() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let tokens = Harness.tokens(20_000)
        let note = Harness.notification()
        let results = await withTaskGroup(of: DeliveryResult?.self) { group in
            for token in tokens { group.addTask { try? await client.send(note, to: token) } }
            var all: [DeliveryResult] = []
            for await r in group { if let r { all.append(r) } }
            return all
        }
        let audit = client.dispatcher.defaultLane.audit
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 && $0.attempts == 1 })
        #expect(Set(results.compactMap(\.apnsID)).count == tokens.count)
        #expect(mock.statistics().byStatus[200] == UInt64(tokens.count))
        #expect(client.statistics.connectionsOpened == 1, "one connection for every caller")
        #expect(audit == .init(busy: 0, free: client.configuration.outstandingLimit, slotsHoldingMessages: 0,
                               waiters: 0, retries: 0))
    }

    /// Several batches at once on a small lane (16 in flight), as apns-server's worker
    /// loops send: a freed slot wakes one waiting batch, which takes no more than the
    /// lane has room for. None is left waiting with no slot to wake it: every message
    /// ends once, with its answer, and the lane ends empty. (The limit only catches a
    /// stall: alone this takes under a second.)
    @Test(.timeLimit(.minutes(5)))
    func batchesSharingAFullLaneAllFinish() async throws {
        let mock = try Harness.mock { $0.latency = .milliseconds(2) }
        let client = try Harness.client(mock, transport: .nghttp2, maxInFlight: 16)
        let note = Harness.notification()
        let tokens = Harness.tokens(2_400)
        let parts = stride(from: 0, to: tokens.count, by: 300).map { Array(tokens[$0..<min($0 + 300, tokens.count)]) }
        let results = await withTaskGroup(of: [DeliveryResult].self) { group in
            for part in parts { group.addTask { await client.sendAll(note, to: part) } }
            var all: [DeliveryResult] = []
            for await part in group { all += part }
            return all
        }
        let audit = client.dispatcher.defaultLane.audit
        await client.shutdown()

        #expect(results.count == tokens.count)
        #expect(Set(results.map(\.token)) == Set(tokens))
        #expect(results.allSatisfy { $0.status == 200 && $0.attempts == 1 })
        #expect(mock.statistics().byStatus[200] == UInt64(tokens.count))
        #expect(mock.statistics().maxConcurrentStreamsSeen <= 16)
        #expect(audit == .init(busy: 0, free: client.configuration.outstandingLimit, slotsHoldingMessages: 0,
                               waiters: 0, retries: 0))
    }

    /// Half the callers are cancelled mid-flight: the other half lose nothing, each
    /// cancelled caller still gets exactly one result (its real answer if it was
    /// sent, status 0 if it was still waiting for room), and nothing stays held.
    @Test func cancellingHalfTheCallersLosesNoneOfTheOthers() async throws {
        // The mock allows one stream at first: the line of 3,900 callers then lasts
        // minutes, so the poll below sees it however long a loaded machine keeps this
        // task waiting (a line that drained in seconds was missed twice in CI). Once
        // the cancel is done the mock allows 50 streams and the rest drain.
        let mock = try Harness.mock {
            $0.latency = .milliseconds(125)
            $0.maxStreams = 1
        }
        // A slow handshake on a loaded machine must not make every caller "unreachable"
        // (status 0 at once), which empties the line before the poll can see it.
        let client = try Harness.client(port: mock.port, transport: .nghttp2, maxInFlight: 50,
                                        connectTimeout: .seconds(60))
        let tokens = Harness.tokens(4_000)
        let note = Harness.notification()
        let send = { (token: String) in Task { try? await client.send(note, to: token) } }
        let keptTasks = tokens.enumerated().filter { $0.offset % 2 == 0 }.map { send($0.element) }
        let doomed = tokens.enumerated().filter { $0.offset % 2 == 1 }.map { send($0.element) }
        // Mid-flight: requests on the wire, many callers still in line.
        let lane = client.dispatcher.defaultLane
        // The line lasts minutes once formed; the deadline only catches one that never forms.
        let deadline = ContinuousClock.now + .seconds(300)
        while !(mock.statistics().requests > 0 && lane.audit.waiters > 1_000) {
            try #require(ContinuousClock.now < deadline, "never saw requests sent with callers still in line")
            try await Task.sleep(for: .milliseconds(2))
        }
        for task in doomed { task.cancel() }
        mock.setMaxStreams(50)
        var keptResults: [DeliveryResult] = [], cancelledResults: [DeliveryResult] = []
        for task in keptTasks { if let r = await task.value { keptResults.append(r) } }
        for task in doomed { if let r = await task.value { cancelledResults.append(r) } }
        await client.shutdown()

        #expect(keptResults.count == tokens.count / 2)
        #expect(keptResults.allSatisfy { $0.status == 200 }, "no kept caller lost its result")
        #expect(cancelledResults.count == tokens.count / 2, "every cancelled caller got exactly one result")
        let neverSent = cancelledResults.filter { $0.attempts == 0 }
        #expect(neverSent.allSatisfy { $0.status == 0 && $0.error == "cancelled before it was sent" && $0.apnsID == nil })
        #expect(!neverSent.isEmpty, "the cancel came while some callers still waited for room")
        #expect(cancelledResults.filter { $0.attempts > 0 }.allSatisfy { $0.status == 200 })
        for r in neverSent { #expect(mock.attempts(for: r.token) == 0, "a caller cancelled while waiting is never sent") }
        #expect(client.dispatcher.defaultLane.audit.slotsHoldingMessages == 0)
        #expect(client.dispatcher.defaultLane.audit.busy == 0)
        #expect(client.dispatcher.defaultLane.audit.waiters == 0)
    }

    /// Each message's own payload and headers arrive as given, with its own apns-id
    /// when it names one, and its context comes back on its result.
    @Test func messagesArriveWithTheirOwnPayloadsAndHeaders() async throws {
        let mock = try Harness.mock { $0.recordRequests = true }
        let client = try Harness.client(mock, transport: .nghttp2)
        let tokens = Harness.tokens(300)
        let topic = TestPKI.shared.topic
        var expected: [String: (APNs.Notification, String?)] = [:]
        var messages: [Message<Int>] = []
        for (i, token) in tokens.enumerated() {
            let note: APNs.Notification = switch i % 3 {
            case 0: try APNs.Notification(topic: topic, payload: Payload(json: #"{"aps":{"badge":\#(i)},"n":\#(i)}"#))
            case 1: try APNs.Notification(topic: topic, pushType: .background, expiration: .immediately,
                                     payload: Payload(json: #"{"aps":{"content-available":1},"order":"o-\#(i)"}"#))
            default: try APNs.Notification(topic: topic, priority: .low, collapseID: "order-\(i)",
                                      payload: Payload(json: #"{"aps":{"alert":"update \#(i)"}}"#))
            }
            let id: String? = i % 5 == 0 ? UUID().uuidString : nil   // upper case: sent lower-case
            expected[token] = (note, id?.lowercased())
            messages.append(Message(token: token, notification: note, apnsID: id, context: i))
        }
        var contexts: [Int] = []
        for await r in client.send(messages) {
            #expect(r.result.status == 200)
            #expect(r.result.token == tokens[r.context], "the context comes back with its own message")
            contexts.append(r.context)
        }
        await client.shutdown()

        #expect(contexts.sorted() == Array(0..<tokens.count))
        let requests = mock.recordedRequests()
        #expect(requests.count == tokens.count)
        for request in requests {
            let token = try #require(request.token)
            let (note, id) = try #require(expected[token])
            #expect(request.body == note.payload.bytes)
            #expect(request.header("apns-push-type") == note.pushType.rawValue)
            #expect(request.header("apns-priority") == note.priority.map { "\($0.rawValue)" })
            #expect(request.header("apns-collapse-id") == note.collapseID)
            #expect(request.header("apns-expiration") == note.expiration.map { _ in "0" })
            if let id { #expect(request.header("apns-id") == id) }
        }
    }

    /// Repeats are not merged, a malformed token or apns-id gets a local result, and
    /// the rest still go.
    @Test func messageBatchesKeepRepeatsAndRefuseMalformedOnesLocally() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let token = Harness.tokens(1)[0], note = Harness.notification()
        let messages = [
            Message(token: token, notification: note, context: "first"),
            Message(token: token, notification: note, context: "repeat"),
            Message(token: "not-a-token", notification: note, context: "bad token"),
            Message(token: token, notification: note, apnsID: "nope", context: "bad id"),
        ]
        var byContext: [String: DeliveryResult] = [:]
        for await r in client.send(messages) { byContext[r.context] = r.result }
        await client.shutdown()

        #expect(byContext["first"]?.status == 200 && byContext["repeat"]?.status == 200)
        #expect(byContext["first"]?.apnsID != byContext["repeat"]?.apnsID)
        #expect(byContext["bad token"]?.reason == .badDeviceToken && byContext["bad token"]?.attempts == 0)
        #expect(byContext["bad id"]?.reason == .badMessageId && byContext["bad id"]?.attempts == 0)
        #expect(mock.attempts(for: token) == 2)
    }

    /// Int contexts, as apns-server's outbox worker sends them (its index in the batch,
    /// an explicit environment, an apns-id each), over more messages than the window
    /// holds: the engine runs code specialized for them (`@_specialize`), and every
    /// message's result still comes back once with its own context, sent or not.
    @Test func intContextsComeBackOnceEachWithTheirOwnMessage() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let note = Harness.notification(), environment = client.configuration.environment
        let tokens = Harness.tokens(2 * client.configuration.outstandingLimit + 123)
        let messages = tokens.enumerated().map { i, token in
            // Every 97th a malformed token, every 89th a malformed apns-id: answered locally.
            Message(token: i % 97 == 5 ? "zz" + token : token, notification: note, environment: environment,
                    apnsID: i % 89 == 7 ? "not-an-id" : UUID().uuidString, context: i)
        }
        var seen = [Int](repeating: 0, count: messages.count)
        var wrong: [Int] = []
        for await r in client.send(messages) {
            seen[r.context] += 1
            let sent = messages[r.context]
            if sent.token.hasPrefix("zz") {
                if r.result.reason != .badDeviceToken { wrong.append(r.context) }
            } else if sent.apnsID == "not-an-id" {
                if r.result.reason != .badMessageId || r.result.token != sent.token { wrong.append(r.context) }
            } else if r.result.status != 200 || r.result.token != sent.token
                        || r.result.apnsID != sent.apnsID?.lowercased() {
                wrong.append(r.context)
            }
        }
        let audit = client.dispatcher.defaultLane.audit
        await client.shutdown()

        #expect(seen.allSatisfy { $0 == 1 }, "one result per message")
        #expect(wrong.isEmpty, "results that do not match their context's message: \(wrong.prefix(5))")
        let sent = messages.filter { !$0.token.hasPrefix("zz") && $0.apnsID != "not-an-id" }.count
        #expect(mock.statistics().byStatus[200] == UInt64(sent))
        #expect(audit == .init(busy: 0, free: client.configuration.outstandingLimit, slotsHoldingMessages: 0,
                               waiters: 0, retries: 0))
    }

    /// Sandbox and production tokens in one stream each go to their own endpoint,
    /// over one connection each.
    @Test func mixedEnvironmentsEachGoToTheirOwnEndpoint() async throws {
        let production = try Harness.mock(), sandbox = try Harness.mock { $0.sandbox = true }
        let pki = TestPKI.shared
        let credentials = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        let client = try APNsClient(configuration: .init(
            credentials: credentials, environment: .production, caFile: pki.caFile, retry: Harness.retry,
            sandboxEndpoint: Endpoint(host: "127.0.0.1", port: Int(sandbox.port)),
            productionEndpoint: Endpoint(host: "127.0.0.1", port: Int(production.port))))
        let tokens = Harness.tokens(1_000)
        let note = Harness.notification()
        let messages = tokens.enumerated().map { i, token in
            Message(token: token, notification: note, environment: i % 2 == 0 ? nil : .sandbox, context: i % 2 == 1)
        }
        var results: [MessageResult<Bool>] = []
        for await r in client.send(messages) { results.append(r) }
        // A single send names its environment too.
        let one = try await client.send(note, to: Harness.tokens(1)[0], environment: .sandbox)
        await client.shutdown()

        #expect(results.count == tokens.count && results.allSatisfy { $0.result.status == 200 })
        #expect(one.status == 200 && one.uniqueID != nil, "the sandbox mock sends apns-unique-id")
        for r in results {
            #expect((r.result.uniqueID != nil) == r.context, "a sandbox message was answered by the sandbox mock")
            let (own, other) = r.context ? (sandbox, production) : (production, sandbox)
            #expect(own.attempts(for: r.result.token) == 1 && other.attempts(for: r.result.token) == 0)
        }
        #expect(production.statistics().connectionsAccepted == 1 && sandbox.statistics().connectionsAccepted == 1)
        #expect(client.statistics.connectionsOpened == 2, "one connection per environment")
    }

    /// Events that arrive over time (an AsyncStream) are sent as they come.
    @Test func anAsyncStreamOfMessagesIsSentAsItArrives() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2, maxInFlight: 10)
        let tokens = Harness.tokens(500)
        let (stream, continuation) = AsyncStream<Message<Int>>.makeStream()
        let note = Harness.notification()
        let producer = Task {
            for (i, token) in tokens.enumerated() {
                continuation.yield(Message(token: token, notification: note, context: i))
                if i % 100 == 99 { try? await Task.sleep(for: .milliseconds(10)) }
            }
            continuation.finish()
        }
        var seen = Set<Int>()
        for await r in client.send(stream) {
            #expect(r.result.status == 200)
            seen.insert(r.context)
        }
        await producer.value
        await client.shutdown()
        #expect(seen == Set(0..<tokens.count))
    }

    /// issue #13, defect 3: a header value with a control character could split the
    /// header and inject another; it is refused when the notification is made.
    @Test func controlCharactersInHeaderValuesAreRefused() throws {
        let payload = Harness.payload
        #expect(throws: APNs.Notification.Error.invalidHeaderValue(field: "apns-collapse-id")) {
            try APNs.Notification(topic: "com.example.app", collapseID: "abc\r\nx-injected: yes", payload: payload)
        }
        #expect(throws: APNs.Notification.Error.invalidHeaderValue(field: "apns-topic")) {
            try APNs.Notification(topic: "com.example.app\r\napns-priority: 5", payload: payload)
        }
        #expect(throws: APNs.Notification.Error.invalidHeaderValue(field: "apns-collapse-id")) {
            try APNs.Notification(topic: "com.example.app", collapseID: "tab\there", payload: payload)
        }
        #expect(throws: APNs.Notification.Error.invalidHeaderValue(field: "apns-topic")) {
            try APNs.Notification(topic: "com.example\u{7f}app", payload: payload)
        }
        #expect(try APNs.Notification(topic: "com.example.app", collapseID: "order 7 – ünïcode ok", payload: payload).collapseID != nil)
    }
}
