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
/// A locked section only decides: which slots go out, which requests end. The C
/// submit (a lock, a copy and often a system call to wake the sender thread) is
/// made after the lock is let go, so that callers and the sender thread do not
/// queue behind it (`settle`). `destroy` sets `cGone` and then waits until no
/// submit is under way before it frees the C sender: no call can reach a freed
/// sender. Authorization is set under the lock, with the same flag checked.
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
    /// A server that refuses the same request this often is not going to take it.
    private static let maxRefusals = 16
    /// How long a provider key APNs refused for this environment stays refused
    /// before one request tries it again (the key's settings may have been fixed).
    static let keyRefusalHold: Duration = .seconds(60)

    init(environment: Environment, configuration: APNsClient.Configuration,
         metrics: ClientMetrics) throws(APNsError) {
        self.environment = environment
        self.endpoint = configuration.endpoint(for: environment)
        self.configuration = configuration
        self.metrics = metrics
        capacity = configuration.outstandingLimit
        providerToken = ProviderToken(credentials: configuration.credentials)
        state = SleepingLock(State(capacity: capacity))
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
            for slot in s.slots where slot.message != nil { capns_message_release(slot.message) }
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

    private struct Slot {
        var token = ""
        var message: OpaquePointer?
        var owner: Owner?
        var attempts = 0
        /// Attempts the server did not process (GOAWAY, REFUSED_STREAM, lost connection):
        /// safe to repeat, so they have a budget of their own.
        var refusals = 0
        /// The latest attempt was one of those: the next goes ahead of new requests.
        var notProcessed = false
        /// Sent again after UnrelatedKeyIdInToken: that happens once.
        var resentOnFreshConnection = false
        /// The owner stopped waiting: no retry, no resend; an answer in flight still counts.
        var cancelled = false
        var firstSent: ContinuousClock.Instant?
        /// The provider token generation of the latest attempt.
        var generation = 0
        /// The single caller that owns it (0 for a batch), so its cancellation finds it.
        var callerID = 0
    }

    private struct Retry {
        let due: ContinuousClock.Instant
        let slot: Int
    }

    /// APNs' answer to a provider key restricted to the other environment, which every
    /// request of this lane gets instead of being sent, until `until`.
    private struct KeyRefusal {
        let status: Int
        let reason: Reason
        let error: String
        let until: ContinuousClock.Instant
    }

    /// A caller waiting for a slot has already handed over its request: the slot
    /// that frees is filled and submitted by the lane (with the other requests of
    /// that completion batch, in one submit), and the caller is resumed only once,
    /// with its result.
    private enum Waiter {
        case caller(id: Int, any Pending, CallerContinuation)
        case batch(BatchInbox)
    }

    private struct State {
        var slots: [Slot]
        var free: [Int]
        /// Invariant: a caller waits only while `free` is empty; a slot that frees goes
        /// to the first waiting caller directly, and wakes every batch before it.
        var waiters = FIFO<Waiter>()
        /// Slots filled for waiting callers, to submit before the lock is let go.
        var starts: [Int] = []
        var retries: [Retry] = []
        var timerDue: ContinuousClock.Instant?
        var rng = RequestRandom()
        var busy = 0
        var installedGeneration = 0
        /// The provider token as last read, and when to read it again: a JWT lives for
        /// 50 minutes, so reading it (a clock, a lock) once a second is enough; an
        /// ExpiredProviderToken answer clears it at once.
        var token: ProviderToken.Current?
        var tokenRecheck = ContinuousClock.Instant.now
        /// Shutdown began: nothing new starts; what is in flight finishes.
        var closed = false
        /// The C sender is (being) freed: no C call may be made.
        var destroyed = false
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
        /// Set when a request used up its attempts without reaching the server; until
        /// the next answer, connection failures end requests at once instead of retrying.
        var unreachable: String?
        /// Set when APNs refused the provider key for this environment: until it runs
        /// out, every request ends at once with this answer instead of being sent.
        var keyRefusal: KeyRefusal?

        init(capacity: Int) {
            slots = Array(repeating: Slot(), count: capacity)
            free = Array((0..<capacity).reversed())
        }

        mutating func take() -> Int? {
            guard let slot = free.popLast() else { return nil }
            busy += 1
            return slot
        }
    }

    /// What a locked section decided and must be done after unlocking: resume
    /// tasks, hand results over, record metrics.
    private struct Effects {
        /// Prepared under the lock, submitted after it (`settle`): new requests, and
        /// requests the server did not process, which go ahead of new ones.
        var fresh = Requests()
        var resends = Requests()
        var finals: [(Owner, DeliveryResult, unreachable: Bool)] = []
        var pokes: [BatchInbox] = []
        var drained: [CheckedContinuation<Void, Never>] = []

        func run(_ metrics: ClientMetrics) {
            var byInbox: [(BatchInbox, [BatchInbox.Item])] = []
            for (owner, result, unreachable) in finals {
                metrics.record(result)
                switch owner {
                case .caller(let c):
                    c.resume(returning: result)
                case .batch(let inbox, let ticket):
                    let item = BatchInbox.Item(ticket: ticket, result: result, unreachable: unreachable)
                    if let k = byInbox.firstIndex(where: { $0.0 === inbox }) {
                        byInbox[k].1.append(item)
                    } else {
                        byInbox.append((inbox, [item]))
                    }
                }
            }
            for (inbox, items) in byInbox { inbox.push(items) }
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
        var fx = Effects()
        locked { s in
            if s.closed || Task.isCancelled {
                let why = s.closed ? APNsError.shutDown.description : "cancelled before it was sent"
                fx.finals.append((.caller(c), notSent(pending, why), false))
            } else if let slot = s.take() {
                fill(&s, slot: slot, ahead ?? pending.request(), owner: .caller(c), callerID: id)
                ahead = nil
                submit(&s, CollectionOfOne(slot), resend: false, &fx)
                submitStarts(&s, &fx)
            } else {
                s.waiters.append(.caller(id: id, pending, c))
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
            if lineLength.load(ordering: .relaxed) != s.waiters.count {
                lineLength.store(s.waiters.count, ordering: .relaxed)
            }
            return result
        }
    }

    /// The caller's task was cancelled. Still in line: it leaves with a result of its
    /// own and is never sent. In flight: its answer still counts, but no resend.
    func cancel(caller id: Int) {
        var fx = Effects()
        locked { s in
            if case .caller(_, let pending, let c)? = s.waiters.removeFirst(where: {
                if case .caller(id, _, _) = $0 { true } else { false }
            }) {
                fx.finals.append((.caller(c), notSent(pending, "cancelled before it was sent"), false))
            } else if let slot = s.slots.firstIndex(where: { $0.callerID == id }) {
                s.slots[slot].cancelled = true
            }
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
            if s.closed { return .closed }
            var started: [Int] = []
            started.reserveCapacity(min(requests.count, s.free.count))
            for (i, request) in zip(requests.indices, requests) {
                guard let slot = s.take() else { break }
                fill(&s, slot: slot, request, owner: .batch(inbox, ticket: ticket(i)))
                started.append(slot)
            }
            if started.count < requests.count { s.waiters.append(.batch(inbox)) }
            submit(&s, started, resend: false, &fx)
            submitStarts(&s, &fx)
            return .started(started.count)
        }
        settle(&fx)
        return result
    }

    /// The batch stopped: nothing of it is sent again; answers in flight still count.
    func cancel(_ inbox: BatchInbox) {
        var fx = Effects()
        locked { s in
            for slot in s.slots.indices {
                if case .batch(let owner, _)? = s.slots[slot].owner, owner === inbox { s.slots[slot].cancelled = true }
            }
            let (mine, others) = s.retries.partitioned { s.slots[$0.slot].cancelled }
            s.retries = others
            for r in mine { finish(&s, r.slot, status: 0, reason: nil, error: "cancelled before it was sent again", &fx) }
            submitStarts(&s, &fx)
        }
        settle(&fx)
    }

    private func fill(_ s: inout State, slot: Int, _ request: Request, owner: Owner, callerID: Int = 0) {
        s.slots[slot].callerID = callerID
        s.slots[slot].token = request.token
        s.slots[slot].message = request.message
        s.slots[slot].owner = owner
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
        } else {
            writeRandomUUID(id, using: &s.rng)
        }
    }

    /// Prepares these slots' requests for the transport (`settle` submits them once
    /// the lock is let go), or ends them when it is gone. A slot counts its attempt
    /// now: its answer can arrive before the submitting thread returns.
    private func submit(_ s: inout State, _ run: some Collection<Int>, resend: Bool, _ fx: inout Effects) {
        guard !run.isEmpty else { return }
        guard !s.destroyed else {
            for slot in run { finish(&s, slot, status: 0, reason: nil, error: APNsError.shutDown.description, &fx) }
            return
        }
        let now = clock.now
        if let refusal = s.keyRefusal {
            if now < refusal.until {
                for slot in run {
                    finish(&s, slot, status: refusal.status, reason: refusal.reason, error: refusal.error, now: now, &fx)
                }
                return
            }
            s.keyRefusal = nil   // its hold ran out: these requests try the key again
        }
        let current: ProviderToken.Current
        if let token = s.token, now < s.tokenRecheck {
            current = token
        } else {
            do {
                current = try providerToken.current()
            } catch {
                for slot in run { finish(&s, slot, status: 0, reason: nil, error: error.description, &fx) }
                return
            }
            s.token = current
            s.tokenRecheck = now + .seconds(1)
        }
        // Never an older token after a newer one: generations only go up here. Under
        // the lock, which `destroy` takes to set `destroyed`, checked above.
        if current.generation > s.installedGeneration {
            connection.setAuthorization(current.jwt)
            s.installedGeneration = current.generation
        }
        for slot in run {
            let base = arena + slot * Lane.slotStride
            let request = capns_request(tag: UInt64(slot), message: s.slots[slot].message,
                                        token: UnsafePointer(base), apns_id: UnsafePointer(base + Lane.tokenStride))
            if resend { fx.resends.append(request) } else { fx.fresh.append(request) }
            s.slots[slot].attempts += 1
            s.slots[slot].generation = current.generation
            s.slots[slot].notProcessed = false
            if s.slots[slot].firstSent == nil { s.slots[slot].firstSent = now }
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
                    for slot in refused {
                        // Never sent after all: the attempt counted in `submit` is undone.
                        s.slots[slot].attempts -= 1
                        if s.slots[slot].attempts == 0 { s.slots[slot].firstSent = nil }
                        finish(&s, slot, status: 0, reason: nil, error: APNsError.shutDown.description, &fx)
                    }
                    submitStarts(&s, &fx)
                }
            }
        }
        fx.run(metrics)
    }

    /// The one C submit, outside the lock. `destroy` raises `cGone` and then waits for
    /// `submitting` to reach 0, while a submit raises `submitting` and then reads
    /// `cGone` (both sequentially consistent): one of the two sees the other, so no
    /// submit reaches a freed sender. Returns how many the transport took.
    private func transmit(_ requests: UnsafeBufferPointer<capns_request>, resend: Bool) -> Int {
        submitting.add(1, ordering: .sequentiallyConsistent)
        defer { submitting.subtract(1, ordering: .sequentiallyConsistent) }
        guard !cGone.load(ordering: .sequentiallyConsistent) else { return 0 }
        let taken = connection.submit(requests, resend: resend)
        metrics.sent.increment(by: Int64(taken))
        return taken
    }

    /// Submits the slots filled for waiting callers, in one call. Ending a request
    /// can fill another (when submitting fails), hence the loop.
    private func submitStarts(_ s: inout State, _ fx: inout Effects) {
        while !s.starts.isEmpty {
            let run = s.starts
            s.starts.removeAll()
            submit(&s, run, resend: false, &fx)
        }
    }

    // MARK: - Answers (on the sender thread)

    private func complete(_ batch: UnsafeBufferPointer<capns_completion>) {
        var fx = Effects()
        // Room for every answer's result at once: grown one append at a time, a batch of
        // 256 reallocated and copied its ~40 KB of results eight times.
        fx.finals.reserveCapacity(batch.count)
        locked { s in
            let now = clock.now
            var resends: [Int] = [], again: [Int] = []
            for c in batch {
                let slot = c.slot
                switch c.outcomeValue {
                case CAPNS_ANSWERED:
                    s.unreachable = nil
                    answered(&s, slot, c, now: now, again: &again, &fx)
                case CAPNS_NOT_PROCESSED:
                    // The server did not act on it: send again at once, ahead of new requests.
                    s.slots[slot].refusals += 1
                    s.slots[slot].notProcessed = true
                    retry(&s, slot, after: .zero, now: now, c, status: 0, again: &resends, &fx)
                case CAPNS_TIMED_OUT:
                    retry(&s, slot, after: backoff(&s, slot), now: now, c, status: 0, again: &again, &fx)
                case CAPNS_CONNECT_FAILED:
                    let slotState = s.slots[slot]
                    if let unreachable = s.unreachable {
                        finish(&s, slot, status: 0, reason: nil, error: unreachable, unreachable: true, &fx)
                    } else if slotState.attempts - slotState.refusals >= configuration.retry.maxAttempts {
                        // Attempts a server refused unprocessed (a GOAWAY, a reset) say nothing
                        // about reaching it: only the others count towards giving up on it.
                        let why = c.errorValue ?? "cannot connect to \(endpoint)"
                        s.unreachable = why
                        configuration.logger.error("\(why)")
                        finish(&s, slot, status: 0, reason: nil, error: why, unreachable: true, &fx)
                    } else {
                        retry(&s, slot, after: backoff(&s, slot), now: now, c, status: 0, again: &again, &fx)
                    }
                default:
                    finish(&s, slot, status: 0, reason: nil, error: c.errorValue ?? "cancelled", &fx)
                }
            }
            submit(&s, resends, resend: true, &fx)
            submit(&s, again, resend: false, &fx)
            submitStarts(&s, &fx)
            armTimer(&s)
        }
        settle(&fx)
    }

    private func answered(_ s: inout State, _ slot: Int, _ c: capns_completion, now: ContinuousClock.Instant,
                          again: inout [Int], _ fx: inout Effects) {
        let status = Int(c.status)
        if status == 200 {
            finish(&s, slot, status: 200, reason: nil, uniqueID: c.uniqueIDValue, now: now, &fx)
            return
        }
        let reason = c.reasonValue
        switch Disposition(status: status, reason: reason) {
        case .final:
            finish(&s, slot, status: status, reason: reason, timestamp: c.timestampValue,
                   uniqueID: c.uniqueIDValue, now: now, &fx)
        case .retryAfterBackoff:
            retry(&s, slot, after: backoff(&s, slot), now: now, c, status: status, again: &again, &fx)
        case .resendOnFreshConnection:
            // The transport retired the connection that answered; the resend opens a
            // fresh one, whose first push binds it to this lane's key. Once: a second
            // such answer means the key itself is the trouble.
            guard !s.slots[slot].resentOnFreshConnection, !s.slots[slot].cancelled else {
                finish(&s, slot, status: status, reason: reason, uniqueID: c.uniqueIDValue, now: now, &fx)
                return
            }
            s.slots[slot].resentOnFreshConnection = true
            metrics.retries.increment()
            again.append(slot)
        case .keyRefused:
            refuseKey(&s, status: status, reason: reason ?? .badEnvironmentKeyIdInToken, now: now, &fx)
            finish(&s, slot, status: status, reason: reason, uniqueID: c.uniqueIDValue,
                   error: s.keyRefusal?.error, now: now, &fx)
        case .refreshTokenAndRetry:
            do {
                _ = try providerToken.expired(generation: s.slots[slot].generation)
                s.token = nil   // the retry's submit reads the new one
                retry(&s, slot, after: .zero, now: now, c, status: status, again: &again, &fx)
            } catch {
                finish(&s, slot, status: status, reason: reason, error: error.description, &fx)
            }
        }
    }

    /// APNs refused this lane's provider key for its environment: a configuration
    /// error. Every request that would still be sent with it ends now, with one result
    /// that names the key and the environment: those waiting for a retry's backoff
    /// here, and (in `submit`) every one not sent yet. Requests already handed to the
    /// transport get their own answer, which is final.
    private func refuseKey(_ s: inout State, status: Int, reason: Reason, now: ContinuousClock.Instant,
                           _ fx: inout Effects) {
        guard s.keyRefusal == nil else { return }
        let key = switch configuration.credentials {
        case .token(let token): "provider key \(token.keyID) (team \(token.teamID))"
        case .certificate: "the client certificate"
        }
        let place = switch environment {
        case .production: "the production environment"
        case .sandbox: "the sandbox (development) environment"
        case .custom: "the environment at \(endpoint)"
        }
        let error = "\(key) is not valid for \(place): APNs answered \(status) \(reason) (a key restricted to "
            + "the other environment); use a key for this environment or for both. Nothing is sent with it "
            + "for \(Lane.keyRefusalHold)"
        configuration.logger.error("\(error)")
        s.keyRefusal = KeyRefusal(status: status, reason: reason, error: error, until: now + Lane.keyRefusalHold)
        let waiting = s.retries
        s.retries.removeAll()
        for r in waiting { finish(&s, r.slot, status: status, reason: reason, error: error, now: now, &fx) }
    }

    /// Schedules another attempt, or ends the request with its last answer when its
    /// attempts are used up or its owner stopped waiting.
    private func retry(_ s: inout State, _ slot: Int, after delay: Duration, now: ContinuousClock.Instant,
                       _ last: capns_completion, status: Int, again: inout [Int], _ fx: inout Effects) {
        let slotState = s.slots[slot]
        let answered = slotState.attempts - slotState.refusals
        guard answered < configuration.retry.maxAttempts, slotState.refusals <= Lane.maxRefusals,
              !slotState.cancelled
        else {
            finish(&s, slot, status: status, reason: last.reasonValue, timestamp: last.timestampValue,
                   error: status == 0 ? last.errorValue : nil, now: now, &fx)
            return
        }
        metrics.retries.increment()
        if configuration.logger.logLevel <= .debug {
            configuration.logger.debug("retrying", metadata: [
                "apns-id": "\(apnsID(slot))", "status": "\(status)",
                "reason": "\(last.reasonValue?.rawValue ?? last.errorValue ?? "")", "delay": "\(delay)",
            ])
        }
        if delay == .zero {
            again.append(slot)
        } else {
            s.retries.append(Retry(due: now + delay, slot: slot))
        }
    }

    private func backoff(_ s: inout State, _ slot: Int) -> Duration {
        configuration.retry.backoff(afterAttempt: s.slots[slot].attempts, using: &s.rng)
    }

    /// Ends a request: its result goes to its owner, its slot to the next waiter.
    private func finish(_ s: inout State, _ slot: Int, status: Int, reason: Reason?, timestamp: Int64? = nil,
                        uniqueID: String? = nil, error: String? = nil, unreachable: Bool = false,
                        now: ContinuousClock.Instant? = nil, _ fx: inout Effects) {
        var done = Slot()
        swap(&done, &s.slots[slot])   // moved out, the slot left empty: no copy, no retain
        let latency = done.firstSent.map { (now ?? clock.now) - $0 } ?? .zero
        let result = DeliveryResult(token: done.token, apnsID: done.attempts > 0 ? apnsID(slot) : nil,
                                    uniqueID: uniqueID, status: status, reason: reason, timestamp: timestamp,
                                    attempts: done.attempts, latency: latency, error: error)
        if let owner = done.owner { fx.finals.append((owner, result, unreachable)) }
        capns_message_release(done.message)
        s.busy -= 1
        release(&s, slot, &fx)
    }

    /// A freed slot goes to the first caller in line (batches before it are woken to
    /// try again), else back to the free list.
    private func release(_ s: inout State, _ slot: Int, _ fx: inout Effects) {
        while let waiter = s.waiters.popFirst() {
            switch waiter {
            case .batch(let inbox):
                fx.pokes.append(inbox)
            case .caller(let id, let pending, let c):
                s.busy += 1
                fill(&s, slot: slot, pending.request(), owner: .caller(c), callerID: id)
                s.starts.append(slot)
                return
            }
        }
        s.free.append(slot)
        if s.busy == 0 {
            fx.drained.append(contentsOf: s.drainWaiters)
            s.drainWaiters.removeAll()
        }
    }

    /// writeRandomUUID writes exactly CAPNS_UUID_LEN characters, as does a validated
    /// caller's apns-id: no strlen needed.
    private func apnsID(_ slot: Int) -> String {
        let id = UnsafeRawPointer(arena + slot * Lane.slotStride + Lane.tokenStride)
        return String(decoding: UnsafeRawBufferPointer(start: id, count: Int(CAPNS_UUID_LEN)), as: UTF8.self)
    }

    // MARK: - Waiting for retries

    /// Makes sure something sends the retries when the earliest falls due.
    private func armTimer(_ s: inout State) {
        guard let earliest = s.retries.lazy.map(\.due).min() else { return }
        if let due = s.timerDue, due <= earliest { return }
        s.timerDue = earliest
        Task { [self] in
            try? await Task.sleep(until: earliest, clock: .continuous)
            fireRetries()
        }
    }

    private func fireRetries() {
        var fx = Effects()
        locked { s in
            s.timerDue = nil
            let now = clock.now
            let (due, waiting) = s.retries.partitioned { $0.due <= now }
            s.retries = waiting
            submit(&s, due.map(\.slot), resend: false, &fx)
            submitStarts(&s, &fx)
            armTimer(&s)
        }
        settle(&fx)
    }

    // MARK: - Shutdown

    /// Nothing new starts; waiting callers end at once, waiting batches are woken to see it.
    func close() {
        var fx = Effects()
        locked { s in
            s.closed = true
            while let waiter = s.waiters.popFirst() {
                switch waiter {
                case .batch(let inbox): fx.pokes.append(inbox)
                case .caller(_, let pending, let c):
                    fx.finals.append((.caller(c), notSent(pending, APNsError.shutDown.description), false))
                }
            }
        }
        settle(&fx)
    }

    /// Returns once every request started has its final result (retries included).
    func drained() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.busy == 0 { return true }
                s.drainWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }

    /// Frees the C sender; after this no C call is made (they end as shut down).
    func destroy() {
        state.withLock { $0.destroyed = true }
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

/// A random (version 4) UUID in lower-case canonical form, CAPNS_UUID_LEN characters and a NUL.
func writeRandomUUID(_ out: UnsafeMutablePointer<CChar>, using rng: inout RequestRandom) {
    var bytes = (rng.next() as UInt64, rng.next() as UInt64)
    withUnsafeMutableBytes(of: &bytes) { raw in
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        let hex: StaticString = "0123456789abcdef"
        let digits = hex.utf8Start
        var n = 0
        for (i, b) in raw.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 {
                out[n] = CChar(UInt8(ascii: "-"))
                n += 1
            }
            out[n] = CChar(bitPattern: digits[Int(b >> 4)])
            out[n + 1] = CChar(bitPattern: digits[Int(b & 0xF)])
            n += 2
        }
        out[n] = 0
    }
}

extension Array {
    /// The elements that match, and the rest, each in order.
    func partitioned(_ matches: (Element) -> Bool) -> ([Element], [Element]) {
        var yes: [Element] = [], no: [Element] = []
        for e in self { if matches(e) { yes.append(e) } else { no.append(e) } }
        return (yes, no)
    }
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
            Audit(busy: s.busy, free: s.free.count, slotsHoldingMessages: s.slots.count { $0.message != nil },
                  waiters: s.waiters.count, retries: s.retries.count)
        }
    }
}
