// TEMPORARY: stands in for the library's per-message API until it lands on main
// (commit "Engine: …"). Deleted at the merge. Serial and single-endpoint: enough
// to run the CLI's own tests, not a model of the engine.
import APNs

struct Message<Context: Sendable>: Sendable {
    var token: String
    var notification: Notification
    var environment: Environment?
    var apnsID: String?
    var context: Context
    init(token: String, notification: Notification, environment: Environment? = nil,
         apnsID: String? = nil, context: Context) {
        self.token = token
        self.notification = notification
        self.environment = environment
        self.apnsID = apnsID
        self.context = context
    }
}

struct MessageResult<Context: Sendable>: Sendable {
    let result: DeliveryResult
    let context: Context
}

struct MessageResults<Context: Sendable>: AsyncSequence {
    typealias Element = MessageResult<Context>
    let client: APNsClient
    let messages: AnyIterator<Message<Context>>

    func makeAsyncIterator() -> Iterator { Iterator(client: client, messages: messages) }

    struct Iterator: AsyncIteratorProtocol {
        let client: APNsClient
        let messages: AnyIterator<Message<Context>>
        mutating func next() async -> MessageResult<Context>? {
            guard !Task.isCancelled, let m = messages.next() else { return nil }
            let r: DeliveryResult
            do {
                r = try await client.send(m.notification, to: m.token)
            } catch {
                r = DeliveryResult(token: m.token, apnsID: nil, status: 0, reason: nil, attempts: 0, error: "\(error)")
            }
            return MessageResult(result: r, context: m.context)
        }
    }
}

extension APNsClient {
    func send<Context: Sendable, Messages: Sequence>(_ messages: Messages) -> MessageResults<Context>
    where Messages.Element == Message<Context> {
        var iterator = messages.makeIterator()
        return MessageResults(client: self, messages: AnyIterator { iterator.next() })
    }
}

struct Endpoint: Sendable, Hashable {
    var host: String
    var port: Int
}
