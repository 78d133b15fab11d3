import CAPNs
import Glibc
import Logging
import Synchronization

/// One environment's share of the engine: its connection (one C sender), its
/// provider token, and a fixed table of request slots that every send to that
/// environment goes through, whatever its kind: a single call, a batch, a stream
/// of messages.
///
/// Per-request cost is O(1): a slot is taken from a free list, filled and
/// submitted. The table never grows: a caller who finds it full suspends in a
/// FIFO queue (cancellable) and is handed the next slot that frees; a batch asks
/// to be woken instead. So a burst of 20,000 single sends costs 20,000 suspended
/// tasks, not 20,000 windows.
///
/// Answers are judged here, on the sender thread, as they arrive: retries and
/// resends go straight back to the transport without a hop through the caller;
/// only a final result leaves the lane.
///
/// Every decision is the state machine's (`LaneStateMachine`): the lane turns calls
/// and C completions into its events, under its lock, and carries out the actions
/// it returns (`perform`). Those that touch a slot's request (filling it, reading
/// it for a submit or a result) are done under the lock, in order, since a later
/// action may hand the same slot to someone else. The C submit (a lock, a copy and
/// often a system call to wake the sender thread) is made after the lock is let go,
/// so that callers and the sender thread do not queue behind it (`settle`), as are
/// resumes, wakes and logs. `destroy` sets `cGone` and then waits until no submit
/// is under way before it frees the C sender: no call can reach a freed sender.
/// Authorization is set under the lock, after the machine's `destroy` event, which
/// stops it from asking for any.
final class Lane: Sendable {
    let environment: Environment
    let endpoint: Endpoint
    let capacity: Int
    let providerToken: ProviderToken
    private let connection: Connection
    private let configuration: APNsClient.Configuration
    private let metrics: ClientMetrics
    private let clock = ContinuousClock()
    private let callerIDs = Atomic<Int>(0)
    /// How many wait in line, as of the last locked section: read without the lock,
    /// as a hint only (see `enter`).
    private let lineLength = Atomic<Int>(0)
    private let state: SleepingLock<State>
    /// Submits under way outside the lock, and the flag that stops new ones: see `transmit`.
    private let submitting = Atomic<Int>(0)
    private let cGone = Atomic<Bool>(false)
    /// Per slot, the NUL-terminated token and apns-id a submitted request points at.
    /// Written only under the lock, for a slot that lock gives exclusive use of.
    nonisolated(unsafe) private let arena: UnsafeMutablePointer<CChar>

    private static let tokenStride = Int(CAPNS_TOKEN_MAX) + 1
    private static let idStride = Int(CAPNS_UUID_LEN) + 1
    private static let slotStride = tokenStride + idStride

    typealias Machine = LaneStateMachine<WaitingCaller, BatchInbox>

    init(environment: Environment, configuration: APNsClient.Configuration,
         metrics: ClientMetrics) throws(APNsError) {
        self.environment = environment
        let endpoint = configuration.endpoint(for: environment)
        self.endpoint = endpoint
        self.configuration = configuration
        self.metrics = metrics
        capacity = configuration.outstandingLimit
        providerToken = ProviderToken(credentials: configuration.credentials)
        let key = switch configuration.credentials {
        case .token(let token): "provider key \(token.keyID) (team \(token.teamID))"
        case .certificate: "the client certificate"
        }
        let place = switch environment {
        case .production: "the production environment"
        case .sandbox: "the sandbox (development) environment"
        case .custom: "the environment at \(endpoint)"
        }
        let machine = Machine(capacity: capacity, retryPolicy: configuration.retry, tokens: providerToken,
                              keyName: key, place: place, cannotConnect: "cannot connect to \(endpoint)")
        state = SleepingLock(State(machine: machine))
        arena = .allocate(capacity: capacity * Lane.slotStride)
        // The C thread reaches the lane through this box, filled once `self` exists;
        // it can call only after the first submit, which needs `self`.
        let box = LaneBox()
        do {
            connection = try Connection(configuration: configuration, endpoint: endpoint) { batch in
                box.lane.complete(batch)
            }
        } catch {
            arena.deallocate()
            throw error
        }
        box.lane = self
    }

    deinit {
        connection.destroy()
        state.withLock { s in
            for held in s.held where held.message != nil { capns_message_release(held.message) }
        }
        arena.deallocate()
    }

    // MARK: - Slots and their owners

    /// Who is told a request's final result.
    enum Owner: Sendable {
        /// One `send(_:to:)` call, suspended until its answer.
        case caller(CallerContinuation)
        /// A batch; the ticket is the batch's own handle on the request.
        case batch(BatchInbox, ticket: Int)
    }

    /// What a caller hands the lane to send: a validated token, its message (one
    /// reference, which the lane takes over) and an apns-id if the caller has one.
    struct Request: @unchecked Sendable {   // the C message is immutable and reference counted
        let token: String
        let message: OpaquePointer
        let apnsID: String?
    }

    /// A single caller waiting in line for a slot.
    struct WaitingCaller {
        let pending: any Pending
        let continuation: CallerContinuation
    }

    /// What a slot holds besides the machine's bookkeeping: the request and its owner.
    private struct Held {
        var token = ""
        var message: OpaquePointer?
        var owner: Owner?
        /// The apns-id's words when it was made here (none when the caller gave one).
        var madeID: (UInt64, UInt64)?
    }

    private struct State {
        var machine: Machine
        var held: [Held]
        var drainWaiters: [CheckedContinuation<Void, Never>] = []

        init(machine: Machine) {
            self.machine = machine
            held = Array(repeating: Held(), count: machine.capacity)
        }
    }

    /// What a locked section decided and must be done after unlocking: submit,
    /// resume tasks, hand results over, arm the timer, log.
    private struct Effects {
        /// Prepared under the lock, submitted after it (`settle`): new requests, and
        /// requests the server did not process, which go ahead of new ones.
        var fresh = Requests()
        var resends = Requests()
        /// Final results for single callers, resumed after the lock.
        var callers: [(CallerContinuation, DeliveryResult)] = []
        /// Requests of batches that ended, by inbox (mostly one); their results are
        /// in the inbox already (`finish`), and the inbox is told after the lock.
        var batches: [(BatchInbox, [BatchInbox.Finished])] = []
        /// How many requests may end in this section (room made for them at once).
        var expected = 1
        var pokes: [BatchInbox] = []
        var drained: [CheckedContinuation<Void, Never>] = []
        var timer: ContinuousClock.Instant?
        var errors: [String] = []

        /// A request's final result, under the lock. A batch's is moved into its
        /// inbox here, so it is never copied on its way to the consumer.
        mutating func finish(_ owner: Owner, _ result: consuming DeliveryResult, unreachable: Bool) {
            switch owner {
            case .caller(let c):
                callers.append((c, result))
            case .batch(let inbox, let ticket):
                inbox.store(result, ticket: ticket)
                let finished = BatchInbox.Finished(ticket: ticket, unreachable: unreachable)
                if let k = batches.firstIndex(where: { $0.0 === inbox }) {
                    batches[k].1.append(finished)
                } else {
                    var list: [BatchInbox.Finished] = []
                    list.reserveCapacity(expected)
                    list.append(finished)
                    batches.append((inbox, list))
                }
            }
        }

        mutating func run() {
            for (c, result) in callers { c.resume(returning: result) }
            for k in batches.indices {
                var list: [BatchInbox.Finished] = []
                swap(&list, &batches[k].1)   // the inbox keeps it without a copy
                batches[k].0.push(list)
            }
            for inbox in pokes { inbox.poke() }
            for c in drained { c.resume() }
        }
    }

    /// Requests to submit in one call. A single caller's one request is kept inline:
    /// a send's path allocates no array for it.
    private struct Requests {
        private var first: capns_request?
        private var more: [capns_request] = []

        var isEmpty: Bool { first == nil }

        mutating func append(_ r: capns_request) {
            if first == nil { first = r } else { more.append(r) }
        }

        /// Empties it, and calls `body` with what it held, in order (not at all when empty).
        mutating func drain(_ body: (UnsafeBufferPointer<capns_request>) -> Void) {
            guard let head = first else { return }
            first = nil
            defer { more.removeAll() }
            if more.isEmpty {
                withUnsafePointer(to: head) { body(UnsafeBufferPointer(start: $0, count: 1)) }
            } else {
                more.insert(head, at: 0)
                more.withUnsafeBufferPointer(body)
            }
        }
    }

    // MARK: - Sending

    /// One caller's send before it has a slot: `request()` is called once, when a slot
    /// is handed over, or `abandon()` once instead, when it is never sent.
    /// `requestAhead()` may be called first, outside the lock: a request made then is
    /// used by the lane or given back (`discard`), and `request()` or `abandon()` is
    /// still called once if it was not used.
    protocol Pending: AnyObject, Sendable {
        var token: String { get }
        func request() -> Request
        func abandon()
        /// A fresh request when making one is cheap to undo (`discard`), else nil.
        func requestAhead() -> Request?
        /// The request `requestAhead()` made, not used.
        func discard(_ unused: Request)
    }

    /// A notification's C message is made only when a slot is handed over: a line of
    /// 20,000 waiting callers holds no C copy of any payload.
    ///
    /// A caller that makes it ahead, on its own thread (`requestAhead`), keeps a
    /// reference of its own until its send returns. The sender thread then lets go of
    /// the others, and the last one, which frees the message, is let go here, on one of
    /// the callers' threads, where it was allocated. Freed on the sender thread, every
    /// message went back to another thread's malloc arena under that arena's lock, and
    /// the callers' next ones came from the arena's slow path (client CPU per single
    /// send at 1,000 callers: −5%, 24 paired rounds).
    final class NotificationSend: Pending, @unchecked Sendable {   // `ahead`: only its caller's thread
        let token: String
        let notification: Notification
        private var ahead: OpaquePointer?

        init(token: String, notification: Notification) {
            self.token = token
            self.notification = notification
        }

        deinit {
            if let ahead { capns_message_release(ahead) }
        }

        func request() -> Request { Request(token: token, message: notification.makeCMessage(), apnsID: nil) }
        func abandon() {}
        func requestAhead() -> Request? {
            let made = request()
            capns_message_retain(made.message)
            ahead = made.message
            return made
        }

        /// Both references go: a caller that waits in line holds no C message.
        func discard(_ unused: Request) {
            capns_message_release(unused.message)
            if let ahead {
                capns_message_release(ahead)
                self.ahead = nil
            }
        }
    }

    /// A request whose message was made ahead (a broadcast, for its path).
    final class MadeSend: Pending, @unchecked Sendable {   // the message is immutable, taken once
        let token: String
        private let message: OpaquePointer

        /// Takes over one reference to `message`.
        init(token: String, message: OpaquePointer) {
            self.token = token
            self.message = message
        }

        func request() -> Request { Request(token: token, message: message, apnsID: nil) }
        func abandon() { capns_message_release(message) }
        /// Its one message can be handed over only once.
        func requestAhead() -> Request? { nil }
        func discard(_ unused: Request) {}
    }

    /// Sends one request made ahead (a broadcast) and waits for its final result.
    func send(_ pending: any Pending) async -> DeliveryResult {
        let id = nextCallerID()
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { enter(pending, caller: id, $0) }
        } onCancel: {
            cancel(caller: id)
        }
    }

    /// A caller suspended in `APNsClient.send(_:to:)`. Unsafe, not checked: the lane
    /// resumes each exactly once (`audit` and the engine tests hold it to that), and
    /// a checked one costs a heap object per send.
    typealias CallerContinuation = UnsafeContinuation<DeliveryResult, Never>

    /// A new caller's number, by which its cancellation finds it.
    func nextCallerID() -> Int { callerIDs.add(1, ordering: .relaxed).newValue }

    /// The synchronous half of one caller's send (the async half is the caller's own
    /// frame, kept to one so that 20,000 waiting callers stay small): it takes a slot
    /// and submits, or waits in line for one; `c` is resumed once with the final result.
    func enter(_ pending: any Pending, caller id: Int, _ c: CallerContinuation) {
        // With nobody in line a slot is almost surely free: the C message (a malloc and
        // a copy of the payload) is made before the lock is taken, which the sender
        // thread needs to hand out results. In line, the message is made when a slot
        // is handed over, so that a long line holds none; one made here in vain (the
        // line formed meanwhile) is released.
        var ahead = lineLength.load(ordering: .relaxed) == 0 ? pending.requestAhead() : nil
        let cancelled = Task.isCancelled
        var fx = Effects()
        locked { s in
            s.machine.enter(caller: id, WaitingCaller(pending: pending, continuation: c), taskCancelled: cancelled,
                            now: clock.now)
            perform(&s, &fx) { source in
                switch source {
                case .entrant:
                    defer { ahead = nil }
                    return (ahead ?? pending.request(), .caller(c))
                case .waiter(let w): return (w.pending.request(), .caller(w.continuation))
                case .batchItem: preconditionFailure("a single send starts no batch item")
                }
            }
        }
        if let unused = ahead { pending.discard(unused) }
        settle(&fx)
    }

    /// Every locked section goes through here, so that `lineLength` follows the line.
    private func locked<R: Sendable>(_ body: (inout State) -> R) -> R {
        state.withLock { s in
            let result = body(&s)
            // Written only when it changed: callers read it on every send, and a store
            // per locked section would take their cache line away each time.
            if lineLength.load(ordering: .relaxed) != s.machine.waiting {
                lineLength.store(s.machine.waiting, ordering: .relaxed)
            }
            return result
        }
    }

    /// The caller's task was cancelled. Still in line: it leaves with a result of its
    /// own and is never sent. In flight: its answer still counts, but no resend.
    func cancel(caller id: Int) {
        var fx = Effects()
        locked { s in
            s.machine.cancel(caller: id)
            perform(&s, &fx)
        }
        settle(&fx)
    }

    /// The result of a caller's send that never left.
    private func notSent(_ pending: any Pending, _ why: String) -> DeliveryResult {
        pending.abandon()
        return DeliveryResult(token: pending.token, apnsID: nil, status: 0, reason: nil, attempts: 0, error: why)
    }

    /// How a batch's attempt to start requests went.
    enum Started {
        /// This many were started (the first ones), all there was room for.
        case started(Int)
        case closed
    }

    /// Starts as many of `requests` as there are free slots, in one submit. For
    /// each started one, `ticket(i)` names it to the batch. When some did not fit,
    /// the batch is woken once a slot frees.
    func start(_ requests: ArraySlice<Request>, for inbox: BatchInbox, ticket: (Int) -> Int) -> Started {
        var fx = Effects()
        let result = locked { s -> Started in
            let started = s.machine.startBatch(count: requests.count, inbox, now: clock.now)
            perform(&s, &fx) { source in
                switch source {
                case .batchItem(let i):
                    let index = requests.startIndex + i
                    return (requests[index], .batch(inbox, ticket: ticket(index)))
                case .waiter(let w): return (w.pending.request(), .caller(w.continuation))
                case .entrant: preconditionFailure("a batch has no entrant")
                }
            }
            switch started {
            case .started(let n): return .started(n)
            case .closed: return .closed
            }
        }
        settle(&fx)
        return result
    }

    /// Free slots now, at least one: a batch takes no more than this into a run. A
    /// batch woken for a freed slot would otherwise build a run the size of its window
    /// (hundreds of requests checked, copied and put back) to start one. The one a
    /// full lane gets is what puts the batch in line to be woken again.
    var room: Int {
        max(1, locked { $0.machine.free.count })
    }

    /// The batch stopped: nothing of it is sent again; answers in flight still count.
    func cancel(_ inbox: BatchInbox) {
        var fx = Effects()
        locked { s in
            s.machine.cancel(batch: inbox, now: clock.now)
            perform(&s, &fx)
        }
        settle(&fx)
    }

    // MARK: - Carrying out the machine's actions

    /// Carries out, in order, what the machine decided in this locked section, and
    /// empties its list. `request` makes the request of a slot the machine filled.
    private func perform(_ s: inout State, _ fx: inout Effects,
                         request: (LaneRequestSource<WaitingCaller>) -> (Request, Owner) = Lane.waiterRequest) {
        var actions = ActionList<Machine.Action>()
        swap(&actions, &s.machine.actions)   // kept apart while the machine's rng is used
        defer { swap(&actions, &s.machine.actions) }   // emptied, its room kept
        actions.drain { action in
            let taken = action
            switch consume taken {
            case .fill(let slot, let source):
                let (made, owner) = request(source)
                fill(&s, slot: slot, made, owner: owner)
            case .authorize(let jwt):
                // Under the lock, in the machine's order: never an older token after a
                // newer one, and never after `destroy` (the machine asks for none then).
                connection.setAuthorization(jwt)
            case .submit(let slot, let resend):
                let base = arena + slot * Lane.slotStride
                let request = capns_request(tag: UInt64(slot), message: s.held[slot].message,
                                            token: UnsafePointer(base), apns_id: UnsafePointer(base + Lane.tokenStride))
                if resend { fx.resends.append(request) } else { fx.fresh.append(request) }
            case .finish(let slot, let ending):
                var done = Held()
                swap(&done, &s.held[slot])   // moved out, the slot left empty: no copy, no retain
                let id: APNsIDValue = if ending.attempts == 0 {
                    .none
                } else if let (first, second) = done.madeID {
                    .random(first, second)
                } else {
                    .given(apnsID(slot))
                }
                let result = DeliveryResult(token: done.token, id: id, uniqueID: ending.uniqueID, status: ending.status,
                                            reason: ending.reason, timestamp: ending.timestamp, attempts: ending.attempts,
                                            latency: ending.latency, error: ending.error)
                if let owner = done.owner {
                    metrics.record(result)
                    fx.finish(owner, result, unreachable: ending.unreachable)
                }
                capns_message_release(done.message)
            case .retrying(let slot, let status, let reason, let error, let delay):
                metrics.retries.increment()
                if let delay, configuration.logger.logLevel <= .debug {
                    configuration.logger.debug("retrying", metadata: [
                        "apns-id": "\(apnsID(slot))", "status": "\(status)",
                        "reason": "\(reason?.rawValue ?? error ?? "")", "delay": "\(delay)",
                    ])
                }
            case .notSent(let caller, let why):
                let result = notSent(caller.pending, why)
                metrics.record(result)
                fx.callers.append((caller.continuation, result))
            case .poke(let inbox):
                fx.pokes.append(inbox)
            case .drained:
                fx.drained.append(contentsOf: s.drainWaiters)
                s.drainWaiters.removeAll()
            case .armTimer(let at):
                fx.timer = s.machine.instant(at)
            case .logError(let message):
                fx.errors.append(message)
            }
        }
    }

    /// How a caller handed a slot after waiting in line makes its request.
    private static func waiterRequest(_ source: LaneRequestSource<WaitingCaller>) -> (Request, Owner) {
        guard case .waiter(let w) = source else { preconditionFailure("only a waiting caller is handed a slot here") }
        return (w.pending.request(), .caller(w.continuation))
    }

    private func fill(_ s: inout State, slot: Int, _ request: Request, owner: Owner) {
        s.held[slot].token = request.token
        s.held[slot].message = request.message
        s.held[slot].owner = owner
        let base = arena + slot * Lane.slotStride
        var token = request.token   // validated: at most CAPNS_TOKEN_MAX bytes, so it fits
        token.withUTF8 { utf8 in
            if let from = utf8.baseAddress { UnsafeMutableRawPointer(base).copyMemory(from: from, byteCount: utf8.count) }
            base[utf8.count] = 0
        }
        let id = base + Lane.tokenStride
        if let given = request.apnsID {
            var k = 0
            for byte in given.utf8 {
                id[k] = CChar(bitPattern: byte)
                k += 1
            }
            id[k] = 0
            s.held[slot].madeID = nil
        } else {
            let words = randomUUIDWords(using: &s.machine.rng)
            writeUUID(UnsafeMutableRawPointer(id), words.0, words.1)
            id[uuidLength] = 0
            s.held[slot].madeID = words
        }
    }

    /// After a locked section: submits what it prepared, then resumes and hands over
    /// what ended. Submitting can end requests (the transport refuses only while it
    /// stops), and ending one can start a waiting one, hence the loop.
    private func settle(_ fx: inout Effects) {
        while !fx.resends.isEmpty || !fx.fresh.isEmpty {
            var refused: [Int] = []
            func send(_ requests: UnsafeBufferPointer<capns_request>, resend: Bool) {
                let taken = transmit(requests, resend: resend)
                for r in requests.dropFirst(taken) { refused.append(Int(r.tag)) }
            }
            fx.resends.drain { send($0, resend: true) }
            fx.fresh.drain { send($0, resend: false) }
            if !refused.isEmpty {
                locked { s in
                    s.machine.transportRefused(refused, now: clock.now)
                    perform(&s, &fx)
                }
            }
        }
        for message in fx.errors { configuration.logger.error("\(message)") }
        if let due = fx.timer {
            Task { [self] in
                try? await Task.sleep(until: due, clock: .continuous)
                fireRetries()
            }
        }
        fx.run()
    }

    /// A call into the C sender, or `gone` once it may be freed. `destroy` raises
    /// `cGone` and then waits for `submitting` to reach 0, while a call raises
    /// `submitting` and then reads `cGone` (both sequentially consistent): one of the
    /// two sees the other, so no call reaches a freed sender.
    @inline(__always)
    private func callingC<T>(orIfGone gone: T, _ body: () -> T) -> T {
        submitting.add(1, ordering: .sequentiallyConsistent)
        defer { submitting.subtract(1, ordering: .sequentiallyConsistent) }
        guard !cGone.load(ordering: .sequentiallyConsistent) else { return gone }
        return body()
    }

    /// The one C submit, outside the lock. Returns how many the transport took.
    private func transmit(_ requests: UnsafeBufferPointer<capns_request>, resend: Bool) -> Int {
        let taken = callingC(orIfGone: 0) { connection.submit(requests, resend: resend) }
        metrics.sent.increment(by: Int64(taken))
        return taken
    }

    /// Runs `job` on the sender thread; false once the lane is destroyed or its
    /// thread has ended.
    func post(_ job: SenderExecutor.Posted) -> Bool {
        callingC(orIfGone: false) { connection.post(job) }
    }

    /// Whether the calling thread is this lane's sender thread (false once destroyed).
    var isSenderThread: Bool {
        callingC(orIfGone: false) { connection.isCurrent }
    }

    // MARK: - Answers (on the sender thread)

    private func complete(_ batch: UnsafeBufferPointer<capns_completion>) {
        var fx = Effects()
        // Room for every answer's result at once: grown one append at a time, a batch of
        // 256 reallocated and copied its ~40 KB of results eight times.
        fx.expected = batch.count
        locked { s in
            s.machine.complete(batch.lazy.map { (slot: $0.slot, answer: $0.answer) }, now: clock.now)
            perform(&s, &fx)
        }
        settle(&fx)
    }

    // MARK: - Waiting for retries

    private func fireRetries() {
        var fx = Effects()
        locked { s in
            s.machine.timerFired(now: clock.now)
            perform(&s, &fx)
        }
        settle(&fx)
    }

    /// writeRandomUUID writes exactly CAPNS_UUID_LEN characters, as does a validated
    /// caller's apns-id: no strlen needed.
    private func apnsID(_ slot: Int) -> String {
        let id = UnsafeRawPointer(arena + slot * Lane.slotStride + Lane.tokenStride)
        return String(decoding: UnsafeRawBufferPointer(start: id, count: Int(CAPNS_UUID_LEN)), as: UTF8.self)
    }

    // MARK: - Shutdown

    /// Nothing new starts; waiting callers end at once, waiting batches are woken to see it.
    func close() {
        var fx = Effects()
        locked { s in
            s.machine.close()
            perform(&s, &fx)
        }
        settle(&fx)
    }

    /// Returns once every request started has its final result (retries included).
    func drained() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.machine.isDrained { return true }
                s.drainWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }

    /// Frees the C sender; after this no C call is made (they end as shut down).
    func destroy() {
        state.withLock { $0.machine.destroy() }
        cGone.store(true, ordering: .sequentiallyConsistent)
        // A submit that read `cGone` false a moment ago is a C call of microseconds.
        while submitting.load(ordering: .sequentiallyConsistent) > 0 { sched_yield() }
        connection.destroy()
    }

    var statistics: capns_sender_stats { connection.statistics() }
}

/// How the C thread finds its lane: set once, right after the lane is made.
private final class LaneBox: @unchecked Sendable {
    unowned(unsafe) var lane: Lane!
}

/// The characters of a canonical UUID (CAPNS_UUID_LEN).
let uuidLength = 36

/// A random (version 4) UUID in lower-case canonical form, CAPNS_UUID_LEN characters and a NUL.
func writeRandomUUID(_ out: UnsafeMutablePointer<CChar>, using rng: inout RequestRandom) {
    let (first, second) = randomUUIDWords(using: &rng)
    writeUUID(UnsafeMutableRawPointer(out), first, second)
    out[uuidLength] = 0
}

/// Two random words with a version 4 UUID's version (byte 6) and variant (byte 8) set.
func randomUUIDWords(using rng: inout RequestRandom) -> (UInt64, UInt64) {
    let first = ((rng.next() as UInt64) & ~(0xF0 << 48)) | (0x40 << 48)
    let second = ((rng.next() as UInt64) & ~0xC0) | 0x80
    return (first, second)
}

/// The UUID whose 16 bytes are the two words' bytes, little-endian, in lower-case
/// canonical form: `uuidLength` characters at `o`, no NUL; written 4 bytes (8 digits) a step.
func writeUUID(_ o: UnsafeMutableRawPointer, _ first: UInt64, _ second: UInt64) {
    let g0 = hexDigits(UInt32(truncatingIfNeeded: first)), g1 = hexDigits(UInt32(truncatingIfNeeded: first >> 32))
    let g2 = hexDigits(UInt32(truncatingIfNeeded: second)), g3 = hexDigits(UInt32(truncatingIfNeeded: second >> 32))
    let dash = UInt8(ascii: "-")
    o.storeBytes(of: g0.littleEndian, toByteOffset: 0, as: UInt64.self)               // 8 digits
    o.storeBytes(of: dash, toByteOffset: 8, as: UInt8.self)
    o.storeBytes(of: UInt32(truncatingIfNeeded: g1).littleEndian, toByteOffset: 9, as: UInt32.self)   // 4
    o.storeBytes(of: dash, toByteOffset: 13, as: UInt8.self)
    o.storeBytes(of: UInt32(truncatingIfNeeded: g1 >> 32).littleEndian, toByteOffset: 14, as: UInt32.self)   // 4
    o.storeBytes(of: dash, toByteOffset: 18, as: UInt8.self)
    o.storeBytes(of: UInt32(truncatingIfNeeded: g2).littleEndian, toByteOffset: 19, as: UInt32.self)   // 4
    o.storeBytes(of: dash, toByteOffset: 23, as: UInt8.self)
    o.storeBytes(of: UInt32(truncatingIfNeeded: g2 >> 32).littleEndian, toByteOffset: 24, as: UInt32.self)
    o.storeBytes(of: g3.littleEndian, toByteOffset: 28, as: UInt64.self)              // 4 + 8 = 12
}

/// The lower-case hex digits of 4 bytes (the lowest first, its high nibble first),
/// as 8 ASCII bytes in memory order when stored little-endian.
@inline(__always)
private func hexDigits(_ bytes: UInt32) -> UInt64 {
    var v = UInt64(bytes)
    v = (v | (v << 16)) & 0x0000_FFFF_0000_FFFF   // byte i in 16-bit lane i
    v = (v | (v << 8)) & 0x00FF_00FF_00FF_00FF
    let nibbles = ((v >> 4) & 0x000F_000F_000F_000F) | ((v & 0x000F_000F_000F_000F) << 8)
    let letters = ((nibbles &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101   // 1 where >= 10
    return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* (UInt64(UInt8(ascii: "a")) - 0x3A)
}

extension Lane {
    /// What a lane holds now, for tests: after a drain every slot is free, holds no
    /// C message reference, and nobody waits.
    struct Audit: Equatable {
        let busy: Int
        let free: Int
        let slotsHoldingMessages: Int
        let waiters: Int
        let retries: Int
    }

    var audit: Audit {
        state.withLock { s in
            Audit(busy: s.machine.busy, free: s.machine.free.count, slotsHoldingMessages: s.held.count { $0.message != nil },
                  waiters: s.machine.waiting, retries: s.machine.retries.count)
        }
    }
}
