import CAPNs
import Synchronization

/// Where lanes leave one batch's final results, and how they wake its consumer.
/// The sender thread pushes; the consumer takes them all at once, or sleeps until
/// there are some (or until a lane has room again, or the input has more).
final class BatchInbox: Sendable {
    struct Item: Sendable {
        let ticket: Int
        let result: DeliveryResult
        /// The request ended because its endpoint cannot be reached.
        let unreachable: Bool
    }

    private struct State {
        var items: [Item] = []
        var waiter: CheckedContinuation<Void, Never>?
        var poked = false

        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            guard let w = waiter else { return nil }
            waiter = nil
            poked = false
            return w
        }
    }

    private let state = Mutex(State())

    func push(_ items: [Item]) {
        let waiter = state.withLock { s in
            // Mostly the consumer took everything: the array is kept, not copied item by item.
            if s.items.isEmpty { s.items = items } else { s.items.append(contentsOf: items) }
            return s.takeWaiter()
        }
        waiter?.resume()
    }

    /// Wakes the consumer: a lane has room, input arrived, or the task was cancelled.
    func poke() {
        let waiter = state.withLock { s in
            s.poked = true
            return s.takeWaiter()
        }
        waiter?.resume()
    }

    func take() -> [Item] {
        state.withLock { s in
            var items: [Item] = []
            swap(&items, &s.items)
            return items
        }
    }

    /// Sleeps until results arrive or a poke, on the caller's executor: the
    /// consumer wakes where it runs, one hop for everything that arrived meanwhile.
    func wait(isolation: isolated (any Actor)? = #isolation) async {
        await withCheckedContinuation(isolation: isolation) { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.items.isEmpty || s.poked {
                    s.poked = false
                    return true
                }
                s.waiter = c
                return false
            }
            if now { c.resume() }
        }
    }
}

/// One message of a batch before it is sent: its token as given, its C message (one
/// reference, owned here until a lane takes it), where it goes, and the caller's value.
struct Outgoing<Context: Sendable>: @unchecked Sendable {   // the C message is immutable
    let token: String
    let message: OpaquePointer
    let environment: Environment?
    let apnsID: String?
    let context: Context
}

/// Drives one batch: pulls messages, keeps at most `window` of them in flight or
/// waiting to be consumed, and hands out one final result per message. It belongs
/// to the task iterating the batch; lanes reach it only through its `BatchInbox`.
///
/// Memory is bounded by the window whatever the input size: results that are
/// ready count against it, and input is read only when there is room.
final class Batch<Context: Sendable> {
    private let client: APNsClient
    private let inbox = BatchInbox()
    private let window: Int
    private var source: Source

    enum Source {
        /// Pulled by the consumer itself, as room allows.
        case sync(() -> Outgoing<Context>?)
        /// Filled by a task of its own (`AsyncFeed`); the consumer takes what is there.
        case async(AsyncFeed<Context>)
    }

    /// The caller's value of each request in flight, by ticket.
    private var contexts: [Context?]
    private var freeTickets: [Int]
    /// Behind a pointer, not a stored property: taken from once per result, and each
    /// access to a class's stored property is checked for exclusivity at run time.
    private let ready: UnsafeMutablePointer<FIFO<(DeliveryResult, Context)>> = .allocate(capacity: 1)
    /// Taken from the input, not started: the lane they go to was full.
    private var pending: [Outgoing<Context>] = []
    private var inputDone = false
    private var cancelled = false
    /// Set when a request ended because its endpoint cannot be reached: the rest of
    /// the batch is not sent, and its results say why.
    private var unreachable: String?
    /// The last lane used, so that a run of messages to one environment looks it up once.
    private var lastLane: (Environment?, Lane)?

    // `@_specialize`: a caller in another module (apns-server's outbox worker, whose
    // contexts are Ints) reaches only the unspecialized entry points, where every
    // per-message step looked up generic metadata (~6% of its drain's CPU). The entry
    // point checks for `Int` and runs code specialized for it.
    @_specialize(where Context == Int)
    init(client: APNsClient, source: Source) {
        self.client = client
        self.source = source
        window = client.configuration.outstandingLimit
        ready.initialize(to: FIFO())
        contexts = Array(repeating: nil, count: window)
        freeTickets = Array((0..<window).reversed())
        if case .async(let feed) = source { feed.start(waking: inbox) }
    }

    deinit {
        if case .async(let feed) = source { feed.stop() }
        for item in pending { capns_message_release(item.message) }
        ready.deinitialize(count: 1)
        ready.deallocate()
    }

    private var inFlight: Int { window - freeTickets.count }
    private var readyCount: Int { ready.pointee.count }

    /// The next final result, or nil when every message has one.
    ///
    /// Runs on the caller's executor (`isolation`): a result already here is
    /// returned with no hop, so a loop on the main actor costs what one in a task
    /// does. Only an empty inbox suspends, and its wake-up serves every result that
    /// arrived in between.
    @_specialize(where Context == Int)
    func next(isolation: isolated (any Actor)? = #isolation) async -> (DeliveryResult, Context)? {
        while true {
            if let result = ready.pointee.popFirst() { return result }
            absorb(inbox.take())
            if readyCount > 0 { continue }
            if Task.isCancelled && !cancelled { cancel() }
            fill()
            if readyCount > 0 { continue }
            if inFlight == 0 && pending.isEmpty && inputDone { return nil }
            await withTaskCancellationHandler(operation: {
                await inbox.wait(isolation: isolation)
            }, onCancel: { [inbox] in
                inbox.poke()
            }, isolation: isolation)
        }
    }

    /// A final result that can be had without waiting, or nil: none is here yet, or
    /// every message has one (`next` tells the two apart, and waits). A consumer that
    /// takes results this way after each `next` makes one async call per wake-up,
    /// not one per result: each call hops to the caller's executor, which with a task
    /// executor preference costs a lock of the task's status records.
    @_specialize(where Context == Int)
    func nextReady() -> (DeliveryResult, Context)? {
        if let result = ready.pointee.popFirst() { return result }
        absorb(inbox.take())
        if readyCount == 0 {
            if Task.isCancelled && !cancelled { cancel() }
            fill()
        }
        return ready.pointee.popFirst()
    }

    private func absorb(_ items: [BatchInbox.Item]) {
        guard !items.isEmpty else { return }
        // Worked on as locals, put back once: each access to a class's stored property
        // is checked for exclusivity at run time, three for every result otherwise.
        var ready = FIFO<(DeliveryResult, Context)>(), contexts: [Context?] = [], freeTickets: [Int] = []
        swap(&ready, &self.ready.pointee)
        swap(&contexts, &self.contexts)
        swap(&freeTickets, &self.freeTickets)
        for item in items {
            if item.unreachable, unreachable == nil { unreachable = item.result.error }
            ready.append((item.result, contexts[item.ticket]!))
            contexts[item.ticket] = nil
            freeTickets.append(item.ticket)
        }
        swap(&ready, &self.ready.pointee)
        swap(&contexts, &self.contexts)
        swap(&freeTickets, &self.freeTickets)
    }

    /// A result made here, for a message that is not sent.
    private func local(_ item: Outgoing<Context>, token: String, reason: Reason? = nil, error: String) {
        capns_message_release(item.message)
        let result = DeliveryResult(token: token, apnsID: nil, status: 0, reason: reason, attempts: 0, error: error)
        client.metrics.record(result)
        ready.pointee.append((result, item.context))
    }

    // MARK: - Sending

    /// Starts what there is room for: pending messages first, then new input, in
    /// runs of one lane each, one submit a run.
    private func fill() {
        var run: [Lane.Request] = [], runContexts: [Context] = []
        var runLane: Lane?, runEnvironment: Environment?
        func flush() -> Bool {
            guard let lane = runLane, !run.isEmpty else { return true }
            defer { run.removeAll(keepingCapacity: true); runContexts.removeAll(keepingCapacity: true) }
            var tickets: [Int] = []
            let outcome = lane.start(run[...], for: inbox) { [self] i in
                let ticket = freeTickets.removeLast()
                tickets.append(ticket)
                return ticket
            }
            let started: Int
            switch outcome {
            case .started(let n): started = n
            case .closed: started = 0
            }
            for (k, ticket) in tickets.enumerated() { contexts[ticket] = runContexts[k] }
            for k in started..<run.count {
                let item = Outgoing(token: run[k].token, message: run[k].message, environment: runEnvironment,
                                    apnsID: run[k].apnsID, context: runContexts[k])
                if case .closed = outcome {
                    local(item, token: item.token, error: APNsError.shutDown.description)
                } else {
                    pending.append(item)
                }
            }
            return started == run.count || outcome.isClosed
        }

        var fromPending = pending
        pending.removeAll()
        var index = 0
        while !cancelled, window - inFlight - readyCount - run.count > 0 {
            let item: Outgoing<Context>
            if index < fromPending.count {
                item = fromPending[index]
                index += 1
            } else if let next = nextInput() {
                item = next
            } else {
                break
            }
            guard let token = DeviceToken(item.token) else {
                local(item, token: item.token.trimmingSpaces, reason: .badDeviceToken,
                      error: "not 64 to 200 hex digits (even count)")
                continue
            }
            var apnsID: String?
            if let given = item.apnsID {
                guard let canonical = canonicalAPNsID(given) else {
                    local(item, token: token.hex, reason: .badMessageId,
                          error: "apns-id '\(given)' is not a UUID (8-4-4-4-12 hex digits)")
                    continue
                }
                apnsID = canonical
            }
            if let unreachable {
                local(item, token: token.hex, error: unreachable)
                continue
            }
            let lane: Lane
            do {
                lane = try self.lane(for: item.environment)
            } catch {
                local(item, token: token.hex, error: error.description)
                continue
            }
            if runLane !== lane {
                if !flush() {
                    fromPending.insert(item, at: index)   // not started: it stays first in line
                    break
                }
                runLane = lane
                runEnvironment = item.environment
            }
            run.append(Lane.Request(token: token.hex, message: item.message, apnsID: apnsID))
            runContexts.append(item.context)
        }
        _ = flush()
        // Whatever was taken from `pending` and not reached stays pending, in order.
        if index < fromPending.count {
            pending.append(contentsOf: fromPending[index...])
            fromPending.removeAll()
        }
    }

    private func nextInput() -> Outgoing<Context>? {
        guard !inputDone, pending.isEmpty else { return nil }
        switch source {
        case .sync(let next):
            if let item = next() { return item }
            inputDone = true
            return nil
        case .async(let feed):
            switch feed.take() {
            case .item(let item): return item
            case .empty: return nil
            case .finished:
                inputDone = true
                return nil
            }
        }
    }

    private func lane(for environment: Environment?) throws(APNsError) -> Lane {
        if let (env, lane) = lastLane, env == environment { return lane }
        let lane = try client.dispatcher.lane(for: environment)
        lastLane = (environment, lane)
        return lane
    }

    /// Stops reading input; messages not started end here, retries pending end with
    /// their last answer. Requests in flight are still awaited: their answers are real.
    private func cancel() {
        cancelled = true
        inputDone = true
        if case .async(let feed) = source { feed.stop() }
        for item in pending { local(item, token: item.token, error: "cancelled before it was sent") }
        pending.removeAll()
        for lane in client.dispatcher.lanes { lane.cancel(inbox) }
    }
}

extension Lane.Started {
    var isClosed: Bool { if case .closed = self { true } else { false } }
}

/// The input of a batch read from an `AsyncSequence`: a task of its own pulls it
/// into a buffer of at most `capacity` messages and wakes the consumer; the
/// consumer takes from the buffer without waiting.
final class AsyncFeed<Context: Sendable>: Sendable {
    enum Taken {
        case item(Outgoing<Context>)
        case empty
        case finished
    }

    private struct State {
        var items: [Outgoing<Context>] = []
        var head = 0
        var finished = false
        var room: CheckedContinuation<Void, Never>?
        var task: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let produce: @Sendable (AsyncFeed<Context>) async -> Void

    init(capacity: Int, produce: @escaping @Sendable (AsyncFeed<Context>) async -> Void) {
        self.capacity = max(1, capacity)
        self.produce = produce
    }

    deinit {
        state.withLock { s in
            for item in s.items[s.head...] { capns_message_release(item.message) }
        }
    }

    fileprivate func start(waking inbox: BatchInbox) {
        self.inbox.withLock { $0 = inbox }
        let task = Task { [self] in
            await produce(self)
            state.withLock { $0.finished = true }
            inbox.poke()
        }
        state.withLock { $0.task = task }
    }

    private let inbox = Mutex<BatchInbox?>(nil)

    fileprivate func stop() {
        let (task, room) = state.withLock { s in
            s.finished = true
            let room = s.room
            s.room = nil
            return (s.task, room)
        }
        task?.cancel()
        room?.resume()
    }

    /// From the producing task: waits for room, then adds one message. False once
    /// the batch stopped reading (the message is then released here).
    func put(_ item: Outgoing<Context>) async -> Bool {
        while true {
            let full = state.withLock { s in s.items.count - s.head >= capacity && !s.finished }
            if !full { break }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                let now = state.withLock { s -> Bool in
                    if s.items.count - s.head < capacity || s.finished { return true }
                    s.room = c
                    return false
                }
                if now { c.resume() }
            }
        }
        let accepted = state.withLock { s -> Bool in
            guard !s.finished else { return false }
            s.items.append(item)
            return true
        }
        if accepted {
            inbox.withLock { $0 }?.poke()
        } else {
            capns_message_release(item.message)
        }
        return accepted
    }

    fileprivate func take() -> Taken {
        let (taken, room) = state.withLock { s -> (Taken, CheckedContinuation<Void, Never>?) in
            guard s.head < s.items.count else { return (s.finished ? .finished : .empty, nil) }
            let item = s.items[s.head]
            s.head += 1
            if s.head == s.items.count {
                s.items.removeAll(keepingCapacity: true)
                s.head = 0
            }
            let room = s.room
            s.room = nil
            return (.item(item), room)
        }
        room?.resume()
        return taken
    }
}
