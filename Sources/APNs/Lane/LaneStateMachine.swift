/// The decisions of one lane (`Lane`), as a state machine: which slot a request
/// gets, who waits for one, which answer ends a request and which sends it again,
/// when retries fall due, what shutdown ends. Each event is a `mutating func`; what
/// it decided is appended to `actions`, which the lane carries out and empties.
///
/// Nothing here locks, calls C, starts a task or reads a clock: the lane holds its
/// lock around the machine and passes the time in. Provider tokens come from the
/// `LaneTokenSource` it is given. So every transition can be driven in a test,
/// without a socket.
///
/// A slot is one request in flight: a fixed table of `capacity` of them bounds what
/// the lane has in flight. A caller who finds none free waits in line (`callers`),
/// and the next slot that frees goes to the first of them. A batch that did not fit
/// waits in a line of its own (`batches`): a slot no caller takes wakes one batch,
/// which starts what there is room for when it runs. Waking every waiting batch for
/// each slot had each of them rebuild its run to start one request, or none.
struct LaneStateMachine<Caller, Batch: AnyObject> {
    typealias Action = LaneAction<Caller, Batch>
    typealias Instant = ContinuousClock.Instant
    /// A point in time as the machine keeps it: the time since `origin`, the first
    /// instant an event brought. A plain value: slots, retries and their copies are
    /// copied as bytes (an `Instant`'s layout is the runtime's to know, so each copy
    /// of a value holding one was a call through its type's value witnesses).
    typealias Time = Duration

    /// A server that refuses the same request this often is not going to take it.
    static var maxRefusals: Int { 16 }
    /// How long a provider key APNs refused for this environment stays refused
    /// before one request tries it again (the key's settings may have been fixed).
    static var keyRefusalHold: Duration { .seconds(60) }

    /// One request in flight, as far as decisions go (the lane keeps its token,
    /// C message and owner).
    struct Slot {
        var attempts = 0
        /// Attempts the server did not process (GOAWAY, REFUSED_STREAM, lost connection):
        /// safe to repeat, so they have a budget of their own.
        var refusals = 0
        /// Sent again after UnrelatedKeyIdInToken: that happens once.
        var resentOnFreshConnection = false
        /// The owner stopped waiting: no retry, no resend; an answer in flight still counts.
        var cancelled = false
        var firstSent: Time?
        /// The provider token generation of the latest attempt.
        var generation = 0
        /// The single caller that owns it (0 for a batch), so its cancellation finds it.
        var callerID = 0
        /// The batch that owns it, so the batch's cancellation finds it.
        var batch: ObjectIdentifier?
    }

    struct Retry {
        let due: Time
        let slot: Int
    }

    /// APNs' answer to a provider key restricted to the other environment, which every
    /// request of this lane gets instead of being sent, until `until`.
    struct KeyRefusal {
        let status: Int
        let reason: Reason
        let error: String
        let until: Time
    }

    /// How a batch's attempt to start requests went.
    enum Started: Equatable {
        /// This many were started (the first ones), all there was room for.
        case started(Int)
        case closed
    }

    let capacity: Int
    let retryPolicy: RetryPolicy
    private let tokens: any LaneTokenSource
    /// Names the key and the environment in the error of a refused key.
    private let keyName: String
    private let place: String
    /// The error of a request that used up its attempts without a connection, when
    /// the transport gave none.
    private let cannotConnect: String

    private(set) var slots: [Slot]
    private(set) var free: [Int]
    /// Single callers waiting for a slot, in order. Invariant: a caller waits only
    /// while `free` is empty.
    private(set) var callers = FIFO<(id: Int, caller: Caller)>()
    /// Batches to wake when a slot frees, in order, each at most once. A free slot
    /// can outlast a waiting batch for a moment: the one woken for it has yet to run.
    private(set) var batches = FIFO<Batch>()
    /// Callers and batches waiting.
    var waiting: Int { callers.count + batches.count }
    private(set) var retries: [Retry] = []
    /// Slots in use (filled, or handed to a waiter).
    private(set) var busy = 0
    /// The retry timer's instant, while one is armed.
    var timerDue: Instant? { timerAt.map { origin! + $0 } }
    private var timerAt: Time?
    /// Drawn from for backoff jitter; the lane draws apns-ids from it too.
    var rng = RequestRandom()
    /// The first instant an event brought: what `Time` counts from.
    private var origin: Instant?
    private(set) var installedGeneration = 0
    /// The provider token as last read, and when to read it again: a JWT lives for
    /// 50 minutes, so reading it (a clock, a lock) once a second is enough; an
    /// ExpiredProviderToken answer clears it at once.
    private var token: ProviderToken.Current?
    private var tokenRecheck: Time?
    /// Shutdown began: nothing new starts; what is in flight finishes.
    private(set) var closed = false
    /// The transport is (being) freed: nothing more is submitted.
    private(set) var destroyed = false
    /// Set when a request used up its attempts without reaching the server; until
    /// the next answer, connection failures end requests at once instead of retrying.
    private(set) var unreachable: String?
    /// Set when APNs refused the provider key for this environment: until it runs
    /// out, every request ends at once with this answer instead of being sent.
    private(set) var keyRefusal: KeyRefusal?

    /// What the events decided, in order, for the lane to carry out and empty
    /// (keeping its capacity: the hot path allocates no array for it).
    var actions = ActionList<Action>()
    /// Slots filled for waiting callers, to submit in one run before the event ends.
    private var starts: [Int] = []
    /// Scratch runs of slots, kept between events for their capacity.
    private var run: [Int] = []
    private var resends: [Int] = []
    private var again: [Int] = []

    init(capacity: Int, retryPolicy: RetryPolicy, tokens: any LaneTokenSource,
         keyName: String, place: String, cannotConnect: String) {
        self.capacity = capacity
        self.retryPolicy = retryPolicy
        self.tokens = tokens
        self.keyName = keyName
        self.place = place
        self.cannotConnect = cannotConnect
        slots = Array(repeating: Slot(), count: capacity)
        free = Array((0..<capacity).reversed())
    }

    // MARK: - Events: new requests

    /// A single caller's send. It gets a free slot and is submitted (`.fill` with
    /// `.entrant`, then `.submit`), or waits in line with `caller`, or ends at once
    /// (`.notSent`) when the lane is closed or its task was cancelled.
    mutating func enter(caller id: Int, _ caller: Caller, taskCancelled: Bool, now: Instant) {
        let now = time(now)
        if closed || taskCancelled {
            let why = closed ? APNsError.shutDown.description : "cancelled before it was sent"
            actions.append(.notSent(caller, why: why))
        } else if let slot = take() {
            slots[slot].callerID = id
            actions.append(.fill(slot: slot, .entrant))
            submit(CollectionOfOne(slot), resend: false, now: now)
            submitStarts(now: now)
        } else {
            callers.append((id: id, caller: caller))
        }
    }

    /// A batch's `count` requests: as many as there are free slots start, the first
    /// ones, in one submit; when some did not fit, the batch waits to be woken (once:
    /// a batch already waiting keeps its place). One that started everything leaves
    /// the line: it waits for nothing, and a slot that woke it would go unused.
    mutating func startBatch(count: Int, _ batch: Batch, now: Instant) -> Started {
        if closed { return .closed }
        let now = time(now)
        var started: [Int] = []
        swap(&started, &run)
        defer {
            started.removeAll(keepingCapacity: true)
            swap(&started, &run)
        }
        for i in 0..<count {
            guard let slot = take() else { break }
            slots[slot].batch = ObjectIdentifier(batch)
            actions.append(.fill(slot: slot, .batchItem(index: i)))
            started.append(slot)
        }
        if started.count < count {
            if !batches.contains(where: { $0 === batch }) { batches.append(batch) }
        } else if !batches.isEmpty {
            _ = batches.removeFirst(where: { $0 === batch })
        }
        submit(started, resend: false, now: now)
        submitStarts(now: now)
        return .started(started.count)
    }

    // MARK: - Events: cancellation

    /// The caller's task was cancelled. Still in line: it leaves with a result of its
    /// own and is never sent. In flight: its answer still counts, but no resend.
    mutating func cancel(caller id: Int) {
        if let waiter = callers.removeFirst(where: { $0.id == id }) {
            actions.append(.notSent(waiter.caller, why: "cancelled before it was sent"))
        } else if let slot = slots.firstIndex(where: { $0.callerID == id }) {
            slots[slot].cancelled = true
        }
    }

    /// The batch stopped: nothing of it is sent again; answers in flight still count,
    /// and its requests waiting for a retry end now. It leaves the line, so that no
    /// freed slot wakes it in vain.
    mutating func cancel(batch: Batch, now: Instant) {
        let now = time(now)
        _ = batches.removeFirst(where: { $0 === batch })
        let id = ObjectIdentifier(batch)
        for slot in slots.indices where slots[slot].batch == id { slots[slot].cancelled = true }
        let (mine, others) = retries.partitioned { slots[$0.slot].cancelled }
        retries = others
        for r in mine { finish(r.slot, LaneEnding(status: 0, error: "cancelled before it was sent again"), now: now) }
        submitStarts(now: now)
    }

    // MARK: - Events: answers

    /// The transport's answers to submitted requests, one batch of them: each ends its
    /// request or schedules another attempt. Requests the server did not process go
    /// out again at once, ahead of the others.
    mutating func complete(_ answers: some Sequence<(slot: Int, answer: LaneAnswer)>, now: Instant) {
        let now = time(now)
        for (slot, answer) in answers { complete(slot: slot, answer, now: now) }
        var run: [Int] = []
        swap(&run, &resends)
        submit(run, resend: true, now: now)
        run.removeAll(keepingCapacity: true)
        swap(&run, &resends)
        swap(&run, &again)
        submit(run, resend: false, now: now)
        run.removeAll(keepingCapacity: true)
        swap(&run, &again)
        submitStarts(now: now)
        armTimer()
    }

    private mutating func complete(slot: Int, _ answer: LaneAnswer, now: Time) {
        switch answer {
        case .answered(let status, let reason, let timestamp, let uniqueID):
            unreachable = nil
            answered(slot, status: status, reason: reason, timestamp: timestamp, uniqueID: uniqueID, now: now)
        case .notProcessed(let error):
            // The server did not act on it: send again at once, ahead of new requests.
            slots[slot].refusals += 1
            retry(slot, after: .zero, now: now, status: 0, reason: nil, timestamp: nil, error: error, resend: true)
        case .timedOut(let error):
            retry(slot, after: backoff(slot), now: now, status: 0, reason: nil, timestamp: nil, error: error)
        case .connectFailed(let error):
            if let unreachable {
                finish(slot, LaneEnding(status: 0, error: unreachable, unreachable: true), now: now)
            } else if slots[slot].attempts - slots[slot].refusals >= retryPolicy.maxAttempts {
                // Attempts a server refused unprocessed (a GOAWAY, a reset) say nothing
                // about reaching it: only the others count towards giving up on it.
                let why = error ?? cannotConnect
                unreachable = why
                actions.append(.logError(why))
                finish(slot, LaneEnding(status: 0, error: why, unreachable: true), now: now)
            } else {
                retry(slot, after: backoff(slot), now: now, status: 0, reason: nil, timestamp: nil, error: error)
            }
        case .cancelled(let error):
            finish(slot, LaneEnding(status: 0, error: error ?? "cancelled"), now: now)
        }
    }

    private mutating func answered(_ slot: Int, status: Int, reason: Reason?, timestamp: Int64?, uniqueID: String?,
                                   now: Time) {
        if status == 200 {
            finish(slot, LaneEnding(status: 200, uniqueID: uniqueID), now: now)
            return
        }
        switch Disposition(status: status, reason: reason) {
        case .final:
            finish(slot, LaneEnding(status: status, reason: reason, timestamp: timestamp, uniqueID: uniqueID), now: now)
        case .retryAfterBackoff:
            retry(slot, after: backoff(slot), now: now, status: status, reason: reason, timestamp: timestamp, error: nil)
        case .resendOnFreshConnection:
            // The transport retired the connection that answered; the resend opens a
            // fresh one, whose first push binds it to this lane's key. Once: a second
            // such answer means the key itself is the trouble.
            guard !slots[slot].resentOnFreshConnection, !slots[slot].cancelled else {
                finish(slot, LaneEnding(status: status, reason: reason, uniqueID: uniqueID), now: now)
                return
            }
            slots[slot].resentOnFreshConnection = true
            actions.append(.retrying(slot: slot, status: status, reason: reason, error: nil, delay: nil))
            again.append(slot)
        case .keyRefused:
            refuseKey(status: status, reason: reason ?? .badEnvironmentKeyIdInToken, now: now)
            finish(slot, LaneEnding(status: status, reason: reason, uniqueID: uniqueID, error: keyRefusal?.error),
                   now: now)
        case .refreshTokenAndRetry:
            do {
                _ = try tokens.expiredToken(generation: slots[slot].generation)
                token = nil   // the retry's submit reads the new one
                retry(slot, after: .zero, now: now, status: status, reason: reason, timestamp: timestamp, error: nil)
            } catch {
                finish(slot, LaneEnding(status: status, reason: reason, error: error.description), now: now)
            }
        }
    }

    /// APNs refused this lane's provider key for its environment: a configuration
    /// error. Every request that would still be sent with it ends now, with one result
    /// that names the key and the environment: those waiting for a retry's backoff
    /// here, and (in `submit`) every one not sent yet. Requests already handed to the
    /// transport get their own answer, which is final.
    private mutating func refuseKey(status: Int, reason: Reason, now: Time) {
        guard keyRefusal == nil else { return }
        let error = "\(keyName) is not valid for \(place): APNs answered \(status) \(reason) (a key restricted to "
            + "the other environment); use a key for this environment or for both. Nothing is sent with it "
            + "for \(Self.keyRefusalHold)"
        actions.append(.logError(error))
        keyRefusal = KeyRefusal(status: status, reason: reason, error: error, until: now + Self.keyRefusalHold)
        let waiting = retries
        retries.removeAll()
        for r in waiting { finish(r.slot, LaneEnding(status: status, reason: reason, error: error), now: now) }
    }

    /// Schedules another attempt (`resend`: at once, ahead of new requests), or ends
    /// the request with its last answer when its attempts are used up or its owner
    /// stopped waiting.
    private mutating func retry(_ slot: Int, after delay: Duration, now: Time, status: Int, reason: Reason?,
                                timestamp: Int64?, error: String?, resend: Bool = false) {
        let s = slots[slot]
        guard s.attempts - s.refusals < retryPolicy.maxAttempts, s.refusals <= Self.maxRefusals, !s.cancelled else {
            finish(slot, LaneEnding(status: status, reason: reason, timestamp: timestamp,
                                    error: status == 0 ? error : nil), now: now)
            return
        }
        actions.append(.retrying(slot: slot, status: status, reason: reason, error: error, delay: delay))
        if delay == .zero {
            if resend { resends.append(slot) } else { again.append(slot) }
        } else {
            retries.append(Retry(due: now + delay, slot: slot))
        }
    }

    private mutating func backoff(_ slot: Int) -> Duration {
        retryPolicy.backoff(afterAttempt: slots[slot].attempts, using: &rng)
    }

    // MARK: - Events: the retry timer

    /// The timer armed by `.armTimer` went off: the retries due go out.
    mutating func timerFired(now: Instant) {
        let now = time(now)
        timerAt = nil
        let (due, waiting) = retries.partitioned { $0.due <= now }
        retries = waiting
        submit(due.lazy.map(\.slot), resend: false, now: now)
        submitStarts(now: now)
        armTimer()
    }

    /// Makes sure a timer goes off when the earliest retry falls due.
    private mutating func armTimer() {
        guard let earliest = retries.lazy.map(\.due).min() else { return }
        if let due = timerAt, due <= earliest { return }
        timerAt = earliest
        actions.append(.armTimer(at: earliest))
    }

    // MARK: - Events: the transport refused a submit

    /// The transport did not take these submitted slots (it is stopping): they were
    /// never sent, so their attempt is undone, and they end as shut down.
    mutating func transportRefused(_ refused: some Sequence<Int>, now: Instant) {
        let now = time(now)
        for slot in refused {
            slots[slot].attempts -= 1
            if slots[slot].attempts == 0 { slots[slot].firstSent = nil }
            finish(slot, LaneEnding(status: 0, error: APNsError.shutDown.description), now: now)
        }
        submitStarts(now: now)
    }

    // MARK: - Events: shutdown

    /// Nothing new starts; waiting callers end at once, waiting batches are woken to
    /// see it. What is in flight (retries included) goes on to its final result.
    mutating func close() {
        closed = true
        while let batch = batches.popFirst() { actions.append(.poke(batch)) }
        while let waiter = callers.popFirst() {
            actions.append(.notSent(waiter.caller, why: APNsError.shutDown.description))
        }
    }

    /// The transport is about to be freed: from now on a submit ends its request
    /// instead (and the transport answers what it held as cancelled).
    mutating func destroy() {
        destroyed = true
    }

    /// Every request started has its final result.
    var isDrained: Bool { busy == 0 }

    /// When the request in `slot` was first handed to the transport.
    /// The instant of a time as the machine keeps it (`.armTimer`'s).
    func instant(_ time: Time) -> Instant { origin! + time }

    func firstSent(_ slot: Int) -> Instant? { slots[slot].firstSent.map { origin! + $0 } }

    /// `now` as the machine keeps time; the first one sets the origin.
    private mutating func time(_ now: Instant) -> Time {
        guard let origin else {
            origin = now
            return .zero
        }
        return now - origin
    }

    // MARK: - Slots

    private mutating func take() -> Int? {
        guard let slot = free.popLast() else { return nil }
        busy += 1
        return slot
    }

    /// Hands these slots to the transport (`.submit`), or ends them when that is
    /// gone, the key is refused or no token can be had. A slot counts its attempt now:
    /// its answer can arrive before the submitting thread returns.
    private mutating func submit(_ run: some Collection<Int>, resend: Bool, now: Time) {
        guard !run.isEmpty else { return }
        guard !destroyed else {
            for slot in run { finish(slot, LaneEnding(status: 0, error: APNsError.shutDown.description), now: now) }
            return
        }
        if let refusal = keyRefusal {
            if now < refusal.until {
                for slot in run {
                    finish(slot, LaneEnding(status: refusal.status, reason: refusal.reason, error: refusal.error),
                           now: now)
                }
                return
            }
            keyRefusal = nil   // its hold ran out: these requests try the key again
        }
        let current: ProviderToken.Current
        if let token, let tokenRecheck, now < tokenRecheck {
            current = token
        } else {
            do {
                current = try tokens.currentToken()
            } catch {
                for slot in run { finish(slot, LaneEnding(status: 0, error: error.description), now: now) }
                return
            }
            token = current
            tokenRecheck = now + .seconds(1)
        }
        // Never an older token after a newer one: generations only go up here.
        if current.generation > installedGeneration {
            actions.append(.authorize(jwt: current.jwt))
            installedGeneration = current.generation
        }
        for slot in run {
            actions.append(.submit(slot: slot, resend: resend))
            slots[slot].attempts += 1
            slots[slot].generation = current.generation
            if slots[slot].firstSent == nil { slots[slot].firstSent = now }
        }
    }

    /// Ends a request: its result goes to its owner (`.finish`), its slot to the next
    /// waiter.
    private mutating func finish(_ slot: Int, _ ending: consuming LaneEnding, now: Time) {
        var done = Slot()
        swap(&done, &slots[slot])
        var ending = ending   // taken over, not copied: its strings are not retained again
        ending.attempts = done.attempts
        ending.latency = done.firstSent.map { now - $0 } ?? .zero
        actions.append(.finish(slot: slot, ending))
        busy -= 1
        release(slot)
    }

    /// A freed slot goes to the first caller in line; else back to the free list, and
    /// the first batch in line is woken to take it. With nothing in flight any more,
    /// every waiting batch is woken: no later slot would wake them, and one woken in
    /// vain (it stopped sending meanwhile) must not leave the rest asleep.
    private mutating func release(_ slot: Int) {
        if let waiter = callers.popFirst() {
            busy += 1
            slots[slot].callerID = waiter.id
            actions.append(.fill(slot: slot, .waiter(waiter.caller)))
            starts.append(slot)
            return
        }
        free.append(slot)
        if busy == 0 {
            while let batch = batches.popFirst() { actions.append(.poke(batch)) }
            actions.append(.drained)
        } else if let batch = batches.popFirst() {
            actions.append(.poke(batch))
        }
    }

    /// Submits the slots filled for waiting callers, in one run. Ending a request can
    /// fill another (when submitting fails), hence the loop.
    private mutating func submitStarts(now: Time) {
        while !starts.isEmpty {
            let run = starts
            starts.removeAll()
            submit(run, resend: false, now: now)
        }
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
