import CAPNs
import Synchronization

/// Where lanes leave one batch's final results, and how they wake its consumer.
/// A result is moved into its ticket's slot and the ticket is pushed; the consumer
/// takes the tickets all at once, and each result out of its slot when it hands it
/// out. So a result is never copied on its way (each copy of one retains and later
/// releases its strings), and what crosses the lock is a list of plain numbers. The
/// consumer sleeps until there are some (or until a lane has room again, or the input
/// has more).
final class BatchInbox: @unchecked Sendable {   // `results`: see below
    /// A request that ended; its result waits in its ticket's slot.
    struct Finished: Sendable {
        let ticket: Int
        /// The request ended because its endpoint cannot be reached.
        let unreachable: Bool
    }

    private struct State {
        var finished: [Finished] = []
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
    /// One slot per ticket. A ticket names one request in flight, so one slot is
    /// written by the lane that ends its request (before `push`) and read by the
    /// consumer (after `take` returned its ticket): the lock orders the two.
    private let results: UnsafeMutablePointer<DeliveryResult>
    /// Which slots hold a result (the others are not initialized), for `deinit`.
    private let filled: UnsafeMutablePointer<Bool>
    private let tickets: Int

    init(tickets: Int) {
        self.tickets = tickets
        results = .allocate(capacity: tickets)
        filled = .allocate(capacity: tickets)
        filled.initialize(repeating: false, count: tickets)
    }

    deinit {
        for ticket in 0..<tickets where filled[ticket] { (results + ticket).deinitialize(count: 1) }
        results.deallocate()
        filled.deallocate()
    }

    /// The lane's side, before `push`ing the ticket: the request's final result.
    func store(_ result: consuming DeliveryResult, ticket: Int) {
        (results + ticket).initialize(to: result)
        filled[ticket] = true
    }

    /// The consumer's side, for a ticket `take` returned: its result, moved out.
    func result(ticket: Int) -> DeliveryResult {
        filled[ticket] = false
        return (results + ticket).move()
    }

    /// The same, with the result lent to `body`, then destroyed.
    func withResult(ticket: Int, _ body: (borrowing DeliveryResult) -> Void) {
        // Moved to a local first: lent straight from the slot, it was copied for the call.
        filled[ticket] = false
        let result = (results + ticket).move()
        body(result)
    }

    /// The error of a ticket's result, left in its slot.
    func error(ticket: Int) -> String? {
        results[ticket].error
    }

    func push(_ finished: consuming [Finished]) {
        var incoming = finished
        let waiter = state.withLock { s in
            // Mostly the consumer took everything: the array is kept, not copied.
            if s.finished.isEmpty { swap(&s.finished, &incoming) } else { s.finished.append(contentsOf: incoming) }
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

    func take() -> [Finished] {
        state.withLock { s in
            var finished: [Finished] = []
            swap(&finished, &s.finished)
            return finished
        }
    }

    /// Sleeps until results arrive or a poke, on the caller's executor: the
    /// consumer wakes where it runs, one hop for everything that arrived meanwhile.
    func wait(isolation: isolated (any Actor)? = #isolation) async {
        await withCheckedContinuation(isolation: isolation) { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if !s.finished.isEmpty || s.poked {
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
    /// Its token and apns-id were checked and are canonical: a message a lane had no
    /// room for waits in `pending`, and is not checked again each time it is tried.
    var checked = false
}

/// Drives one batch: pulls messages, keeps at most `window` of them in flight or
/// waiting to be consumed, and hands out one final result per message. It belongs
/// to the task iterating the batch; lanes reach it only through its `BatchInbox`.
///
/// Memory is bounded by the window whatever the input size: results that are
/// ready count against it, and input is read only when there is room.
final class Batch<Context: Sendable> {
    private let client: APNsClient
    private let inbox: BatchInbox
    private let window: Int
    // Read for every message taken from the input, like `pending` and `inputDone`:
    // unchecked for exclusivity at run time (each checked access of a class's stored
    // property costs more than the read), which is sound since only the task that
    // iterates the batch touches them, and never while another access is open.
    @exclusivity(unchecked) private var source: Source

    enum Source {
        /// Pulled by the consumer itself, as room allows.
        case sync(() -> Outgoing<Context>?)
        /// Filled by a task of its own (`AsyncFeed`); the consumer takes what is there.
        case async(AsyncFeed<Context>)
    }

    /// Behind a pointer, not stored properties: used several times per result, and
    /// each access to a class's stored property is checked for exclusivity at run time.
    private let book: UnsafeMutablePointer<Book> = .allocate(capacity: 1)

    private struct Book {
        /// The caller's value of each request in flight, by ticket.
        var contexts: [Context?]
        var freeTickets: [Int]
        /// Results made here, for messages not sent; handed out first.
        var local = FIFO<(DeliveryResult, Context)>()
        /// Requests that ended, taken from the inbox, from `head` on not handed out
        /// yet. Their tickets stay taken until they are: their results are in the inbox.
        var finished: [BatchInbox.Finished] = []
        var head = 0
    }
    /// Taken from the input, not started: the lane they go to was full.
    @exclusivity(unchecked) private var pending: [Outgoing<Context>] = []
    @exclusivity(unchecked) private var inputDone = false
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
        inbox = BatchInbox(tickets: window)
        book.initialize(to: Book(contexts: Array(repeating: nil, count: window), freeTickets: Array((0..<window).reversed())))
        if case .async(let feed) = source { feed.start(waking: inbox) }
    }

    deinit {
        if case .async(let feed) = source { feed.stop() }
        for item in pending { capns_message_release(item.message) }
        book.deinitialize(count: 1)
        book.deallocate()
    }

    /// Requests started and not handed out (their results may be here already).
    private var inFlight: Int { window - book.pointee.freeTickets.count }
    /// Results here, not handed out.
    private var readyCount: Int { book.pointee.local.count + book.pointee.finished.count - book.pointee.head }

    /// The next final result, or nil when every message has one.
    ///
    /// Runs on the caller's executor (`isolation`): a result already here is
    /// returned with no hop, so a loop on the main actor costs what one in a task
    /// does. Only an empty inbox suspends, and its wake-up serves every result that
    /// arrived in between.
    @_specialize(where Context == Int)
    func next(isolation: isolated (any Actor)? = #isolation) async -> (DeliveryResult, Context)? {
        while true {
            if let result = popReady() { return result }
            absorb(inbox.take())
            if readyCount > 0 { continue }
            if Task.isCancelled && !cancelled { cancel() }
            fill()
            if readyCount > 0 { continue }
            if inFlight == 0 && pending.isEmpty && inputDone { return nil }
            // Once cancelled, what is left is answers in flight. A handler would poke at
            // once, each time, and the loop would spin: on the sender's thread, where a
            // resumed task goes on without returning to the thread's loop, those answers
            // would never come.
            if cancelled {
                await inbox.wait(isolation: isolation)
                continue
            }
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
        if let result = popReady() { return result }
        absorb(inbox.take())
        if readyCount == 0 {
            if Task.isCancelled && !cancelled { cancel() }
            fill()
        }
        return popReady()
    }

    /// `nextReady` until it says none, each result lent to `body` instead of
    /// returned: a consumer that writes results as they come then moves none of
    /// them (128 bytes each) from call to call.
    @_specialize(where Context == Int)
    func forEachReady(_ body: (borrowing DeliveryResult, borrowing Context) -> Void) {
        while true {
            while popReady(into: body) {}
            absorb(inbox.take())
            if readyCount == 0 {
                if Task.isCancelled && !cancelled { cancel() }
                fill()
                if readyCount == 0 { return }
            }
        }
    }

    /// `popReady`, the result lent to `body`; false when none is here.
    private func popReady(into body: (borrowing DeliveryResult, borrowing Context) -> Void) -> Bool {
        let b = book
        if let (result, context) = b.pointee.local.popFirst() {
            body(result, context)
            return true
        }
        guard b.pointee.head < b.pointee.finished.count else { return false }
        let ticket = b.pointee.finished[b.pointee.head].ticket
        b.pointee.head += 1
        let context = b.pointee.contexts[ticket].take()!
        b.pointee.freeTickets.append(ticket)
        inbox.withResult(ticket: ticket) { body($0, context) }
        return true
    }

    /// A result here, moved out, and its ticket freed.
    private func popReady() -> (DeliveryResult, Context)? {
        let b = book
        if let result = b.pointee.local.popFirst() { return result }
        guard b.pointee.head < b.pointee.finished.count else { return nil }
        let ticket = b.pointee.finished[b.pointee.head].ticket
        b.pointee.head += 1
        let context = b.pointee.contexts[ticket].take()!
        b.pointee.freeTickets.append(ticket)
        return (inbox.result(ticket: ticket), context)
    }

    private func absorb(_ taken: consuming [BatchInbox.Finished]) {
        var taken = taken
        guard !taken.isEmpty else { return }
        if unreachable == nil, let f = taken.first(where: \.unreachable) { unreachable = inbox.error(ticket: f.ticket) }
        let b = book
        if b.pointee.head == b.pointee.finished.count {
            swap(&b.pointee.finished, &taken)
            b.pointee.head = 0
        } else {
            b.pointee.finished.append(contentsOf: taken)
        }
    }

    /// A result made here, for a message that is not sent.
    private func local(_ item: Outgoing<Context>, token: String, reason: Reason? = nil, error: String) {
        capns_message_release(item.message)
        let result = DeliveryResult(token: token, apnsID: nil, status: 0, reason: reason, attempts: 0, error: error)
        client.metrics.record(result)
        book.pointee.local.append((result, item.context))
    }

    // MARK: - Sending

    /// Starts what there is room for: pending messages first, then new input, in
    /// runs of one lane each, one submit a run.
    private func fill() {
        var run: [Lane.Request] = [], runContexts: [Context] = []
        var runLane: Lane?, runEnvironment: Environment?
        // The run's lane had this much room when the run began (see `Lane.room`).
        var runRoom = 0
        func flush() -> Bool {
            guard let lane = runLane, !run.isEmpty else { return true }
            defer { run.removeAll(keepingCapacity: true); runContexts.removeAll(keepingCapacity: true) }
            let outcome = lane.start(run[...], for: inbox) { [self] i in
                let ticket = book.pointee.freeTickets.removeLast()
                book.pointee.contexts[ticket] = runContexts[i]
                return ticket
            }
            let started: Int
            switch outcome {
            case .started(let n): started = n
            case .closed: started = 0
            }
            for k in started..<run.count {
                let item = Outgoing(token: run[k].token, message: run[k].message, environment: runEnvironment,
                                    apnsID: run[k].apnsID, context: runContexts[k], checked: true)
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
        // Room: free tickets, less the results made here (they count against the window too).
        while !cancelled, book.pointee.freeTickets.count - book.pointee.local.count - run.count > 0 {
            let item: Outgoing<Context>
            if index < fromPending.count {
                item = fromPending[index]
                index += 1
            } else if let next = nextInput() {
                item = next
            } else {
                break
            }
            let token: String, apnsID: String?
            if item.checked {
                (token, apnsID) = (item.token, item.apnsID)
            } else {
                guard let hex = DeviceToken.hex(of: item.token) else {
                    local(item, token: item.token.trimmingSpaces, reason: .badDeviceToken,
                          error: "not 64 to 200 hex digits (even count)")
                    continue
                }
                token = hex
                if let given = item.apnsID {
                    guard let canonical = canonicalAPNsID(given) else {
                        local(item, token: token, reason: .badMessageId,
                              error: "apns-id '\(given)' is not a UUID (8-4-4-4-12 hex digits)")
                        continue
                    }
                    apnsID = canonical
                } else {
                    apnsID = nil
                }
            }
            if let unreachable {
                local(item, token: token, error: unreachable)
                continue
            }
            let lane: Lane
            do {
                lane = try self.lane(for: item.environment)
            } catch {
                local(item, token: token, error: error.description)
                continue
            }
            if runLane !== lane || run.count >= runRoom {
                if !flush() {
                    fromPending.insert(item, at: index)   // not started: it stays first in line
                    break
                }
                runLane = lane
                runEnvironment = item.environment
                runRoom = lane.room
            }
            run.append(Lane.Request(token: token, message: item.message, apnsID: apnsID))
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
