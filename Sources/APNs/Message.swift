import CAPNs
#if canImport(Glibc)
import Glibc
#endif

/// One notification to one device: the unit of a per-event send ("order 1234 is
/// ready" to one customer's phone), with a value of the caller's carried back on
/// its result (a user id, a log row id).
public struct Message<Context: Sendable>: Sendable {
    /// Hex digits; a malformed token gets a local result (status 0, BadDeviceToken).
    public var token: String
    /// The headers and payload sent to `token`.
    public var notification: Notification
    /// Where it goes; nil: the client's `configuration.environment`.
    public var environment: Environment?
    /// The apns-id to send it with (a canonical UUID, any case), e.g. one stored in
    /// an outbox so that a resend after a crash carries the same one; nil: a fresh one.
    public var apnsID: String?
    /// The caller's value, handed back with the message's result.
    public var context: Context

    /// A message carrying `context` back on its result.
    public init(token: String, notification: Notification, environment: Environment? = nil,
                apnsID: String? = nil, context: Context) {
        self.token = token
        self.notification = notification
        self.environment = environment
        self.apnsID = apnsID
        self.context = context
    }
}

extension Message where Context == Void {
    /// A message without a context.
    public init(token: String, notification: Notification, environment: Environment? = nil, apnsID: String? = nil) {
        self.init(token: token, notification: notification, environment: environment, apnsID: apnsID, context: ())
    }
}

/// A message's final result and the caller's value it carried.
public struct MessageResult<Context: Sendable>: Sendable {
    /// What happened to the message, after any retries.
    public let result: DeliveryResult
    /// The message's `context`.
    public let context: Context
}

/// The results of a batch of messages, as an async sequence: one per message, in
/// completion order. Messages are read only as results are consumed.
public struct MessageResults<Context: Sendable>: AsyncSequence {
    /// One message's result with its context.
    public typealias Element = MessageResult<Context>
    let makeBatch: () -> Batch<Context>

    /// Starts the batch: messages are read and sent from here on, as results are consumed.
    /// Iterate once; each iteration sends the messages anew.
    @_specialize(where Context == Int)   // see Batch.init
    public func makeAsyncIterator() -> Iterator {
        Iterator(batch: makeBatch())
    }

    /// Reads the batch's results. A loop that stops early sends nothing more; a task
    /// cancelled while iterating ends the messages not yet sent with status 0, while
    /// those in flight still get their real answers.
    public struct Iterator: AsyncIteratorProtocol {
        let batch: Batch<Context>

        /// `for await` calls this one, with the loop's actor: it runs there, and a
        /// result already here comes with no hop (see `Batch.next(isolation:)`).
        @_specialize(where Context == Int)
        public mutating func next(isolation actor: isolated (any Actor)?) async -> MessageResult<Context>? {
            await batch.next(isolation: actor).map { MessageResult(result: $0.0, context: $0.1) }
        }

        #if compiler(>=6.2)
        /// The next result in completion order, waiting for one; nil once every message has one.
        @_specialize(where Context == Int)
        public nonisolated(nonsending) mutating func next() async -> MessageResult<Context>? {
            await batch.next().map { MessageResult(result: $0.0, context: $0.1) }
        }
        #else
        /// The next result in completion order, waiting for one; nil once every message has one.
        @_specialize(where Context == Int)
        public mutating func next() async -> MessageResult<Context>? {
            await batch.next(isolation: nil).map { MessageResult(result: $0.0, context: $0.1) }
        }
        #endif
    }
}

/// The results of one notification sent to many tokens: one per token, as they complete.
public struct DeliveryResults: AsyncSequence {
    /// One token's result.
    public typealias Element = DeliveryResult
    let makeBatch: () -> Batch<Void>

    /// Starts the batch: tokens are read and sent from here on, as results are consumed.
    /// Iterate once; each iteration sends to the tokens anew.
    public func makeAsyncIterator() -> Iterator {
        Iterator(batch: makeBatch())
    }

    /// Reads the batch's results. A loop that stops early sends nothing more; a task
    /// cancelled while iterating ends the tokens not yet sent with status 0, while
    /// those in flight still get their real answers.

    public struct Iterator: AsyncIteratorProtocol {
        let batch: Batch<Void>

        /// `for await` calls this one, with the loop's actor: it runs there, and a
        /// result already here comes with no hop (see `Batch.next(isolation:)`).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> DeliveryResult? {
            await batch.next(isolation: actor)?.0
        }

        /// The next result if one is here already, without waiting; nil when none is
        /// (then `next()` waits for one, or ends). For a loop that drains what arrived
        /// after each `next()`: one async call per wake-up instead of one per result.
        package mutating func nextReady() -> DeliveryResult? {
            batch.nextReady()?.0
        }

        /// `nextReady()` until it says none, each result lent to `body` instead of
        /// returned (a move of the result less per call).
        package mutating func forEachReady(_ body: (borrowing DeliveryResult) -> Void) {
            batch.forEachReady { result, _ in body(result) }
        }

        #if compiler(>=6.2)
        /// The next result in completion order, waiting for one; nil once every token has one.
        public nonisolated(nonsending) mutating func next() async -> DeliveryResult? {
            await batch.next()?.0
        }
        #else
        /// The next result in completion order, waiting for one; nil once every token has one.
        public mutating func next() async -> DeliveryResult? {

            await batch.next(isolation: nil)?.0
        }
        #endif
    }
}

extension Notification {
    /// The C copy of the headers and payload, with one reference for the caller.
    func makeCMessage() -> OpaquePointer {
        let message = topic.withCString { topic in
            withOptionalCString(pushType.rawValue) { pushType in
                withOptionalCString(collapseID) { collapse in
                    payload.bytes.withUnsafeBufferPointer { body in
                        var spec = capns_message_spec(
                            topic: topic, push_type: pushType, priority: Int32(priority?.rawValue ?? 0),
                            expiration: expiration?.headerValue ?? -1, collapse_id: collapse,
                            payload: body.baseAddress, payload_len: body.count, channel_id: nil)
                        return capns_message_create(&spec)
                    }
                }
            }
        }
        // Every header value was checked when the notification was made (the C side
        // refuses control characters too, with EINVAL): only memory can fail here.
        guard let message else {
            fatalError(errno == EINVAL ? "a header value with a control character passed Notification's check"
                                       : "out of memory creating a message")
        }
        return message
    }
}

/// A caller's apns-id in the form APNs wants (lower-case canonical UUID), or nil.
func canonicalAPNsID(_ id: String) -> String? {
    // An outbox hands back the ids it made, already canonical: those are kept as
    // they are, with no copy (this check ran per message on a worker's hot path).
    var id = id
    let canonical = id.withUTF8 { b -> Bool in
        guard b.count == Int(CAPNS_UUID_LEN) else { return false }
        for (i, c) in b.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66)) {
                return false
            }
        }
        return true
    }
    if canonical { return id }
    let utf8 = Array(id.utf8)
    guard utf8.count == Int(CAPNS_UUID_LEN) else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(utf8.count)
    for (i, c) in utf8.enumerated() {
        if i == 8 || i == 13 || i == 18 || i == 23 {
            guard c == UInt8(ascii: "-") else { return nil }
            out.append(c)
            continue
        }
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): out.append(c)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): out.append(c + 32)
        default: return nil
        }
    }
    return String(decoding: out, as: UTF8.self)
}
