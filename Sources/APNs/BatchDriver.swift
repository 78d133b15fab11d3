import CAPNs
import Logging

/// Drives one batch: pulls tokens, keeps at most `window` of them in flight or
/// waiting, applies the retry policy to every answer and hands out one final
/// `DeliveryResult` per token. It belongs to the task iterating the batch; only
/// its `Inbox` is shared with the sender thread.
///
/// Memory is bounded by the window whatever the input size: slots (with their C
/// strings in one arena) are reused, ready results count against the window, and
/// input is read only when there is room.
final class BatchDriver {
    private struct Slot {
        var token = ""
        var attempts = 0
        /// Attempts the server did not process (GOAWAY, REFUSED_STREAM, lost connection):
        /// safe to repeat, so they have a budget of their own.
        var refusals = 0
        /// The latest attempt was one of those: the next goes ahead of new requests.
        var notProcessed = false
        var firstSent: ContinuousClock.Instant?
        /// The provider token generation of the latest attempt.
        var generation = 0
    }

    private struct Retry {
        let due: ContinuousClock.Instant
        let slot: Int
    }

    private let client: APNsClient
    private let notification: Notification
    private let message: OpaquePointer
    private var input: AnyIterator<String>
    private var inputDone = false
    private let inbox: Inbox
    private let window: Int
    private let clock = ContinuousClock()
    private var rng = RequestRandom()

    private var slots: [Slot]
    private var freeSlots: [Int]
    /// Per slot, NUL-terminated token then apns-id: the C strings a request points at.
    private let arena: UnsafeMutablePointer<CChar>
    private static let tokenStride = Int(CAPNS_TOKEN_MAX) + 1
    private static let idStride = Int(CAPNS_UUID_LEN) + 1
    private static let slotStride = tokenStride + idStride
    /// A server that refuses the same request this often is not going to take it.
    private static let maxRefusals = 16

    private var toSubmit: [Int] = []
    private var retries: [Retry] = []
    private var ready: [DeliveryResult] = []
    private var readyHead = 0
    private var inFlight = 0
    private var timerDue: ContinuousClock.Instant?
    /// Set when a token used up its attempts without ever reaching the server:
    /// the rest of the batch is not sent, and its records say why.
    private var unreachable: String?
    private var cancelled = false

    init(client: APNsClient, notification: Notification, tokens: AnyIterator<String>) {
        self.client = client
        self.notification = notification
        self.message = BatchDriver.makeMessage(notification)
        self.input = tokens
        self.window = client.configuration.outstandingLimit
        self.inbox = client.router.makeInbox()
        slots = Array(repeating: Slot(), count: window)
        freeSlots = Array((0..<window).reversed())
        arena = .allocate(capacity: window * BatchDriver.slotStride)
        if client.isShutDown { unreachable = APNsError.shutDown.description }
    }

    deinit {
        client.router.unregister(inbox.id)
        capns_message_release(message)
        arena.deallocate()
    }

    /// The next final result, or nil when every token has one.
    func next() async -> DeliveryResult? {
        while true {
            if let result = popReady() { return result }
            handle(inbox.take())
            if hasReady { continue }
            if Task.isCancelled && !cancelled { cancel() }
            fill()
            if hasReady { continue }
            if inFlight == 0 && toSubmit.isEmpty && retries.isEmpty && inputDone { return nil }
            armTimer()
            await withTaskCancellationHandler {
                await inbox.wait()
            } onCancel: { [inbox] in
                inbox.poke()
            }
        }
    }

    // MARK: - Results

    private var hasReady: Bool { readyHead < ready.count }

    private func popReady() -> DeliveryResult? {
        guard hasReady else { return nil }
        let result = ready[readyHead]
        readyHead += 1
        if readyHead == ready.count {
            ready.removeAll(keepingCapacity: true)
            readyHead = 0
        }
        return result
    }

    private func finish(_ slot: Int, status: Int, reason: Reason?, timestamp: Int64? = nil,
                        uniqueID: String? = nil, error: String? = nil) {
        let s = slots[slot]
        let latency = s.firstSent.map { clock.now - $0 } ?? .zero
        let result = DeliveryResult(token: s.token, apnsID: s.attempts > 0 ? apnsID(slot) : nil,
                                    uniqueID: uniqueID, status: status, reason: reason, timestamp: timestamp,
                                    attempts: s.attempts, latency: latency, error: error)
        client.record(result)
        ready.append(result)
        slots[slot] = Slot()
        freeSlots.append(slot)
    }

    // MARK: - Answers

    private func handle(_ completions: [Completion]) {
        let now = clock.now
        for c in completions {
            inFlight -= 1
            let slot = c.slot
            switch c.outcome {
            case CAPNS_ANSWERED:
                answered(slot, c, now: now)
            case CAPNS_NOT_PROCESSED:
                // The server did not act on it: send again at once (a new connection if need be).
                slots[slot].refusals += 1
                slots[slot].notProcessed = true
                retry(slot, after: .zero, now: now, or: c, status: 0)
            case CAPNS_TIMED_OUT:
                retry(slot, after: backoff(slot), now: now, or: c, status: 0)
            case CAPNS_CONNECT_FAILED:
                if let unreachable {
                    finish(slot, status: 0, reason: nil, error: unreachable)
                } else if slots[slot].attempts - slots[slot].refusals >= client.configuration.retry.maxAttempts {
                    // Attempts a server refused unprocessed (a GOAWAY, a reset) say nothing
                    // about reaching it: only the others count towards giving up on it.
                    unreachable = c.error ?? "cannot connect to \(client.configuration.environment)"
                    client.configuration.logger.error("\(unreachable!)")
                    finish(slot, status: 0, reason: nil, error: unreachable)
                } else {
                    retry(slot, after: backoff(slot), now: now, or: c, status: 0)
                }
            default:
                finish(slot, status: 0, reason: nil, error: c.error ?? "cancelled")
            }
        }
    }

    private func answered(_ slot: Int, _ c: Completion, now: ContinuousClock.Instant) {
        if c.status == 200 {
            finish(slot, status: 200, reason: nil, uniqueID: c.uniqueID)
            return
        }
        switch Disposition(status: c.status, reason: c.reason) {
        case .final:
            finish(slot, status: c.status, reason: c.reason, timestamp: c.timestamp, uniqueID: c.uniqueID)
        case .retryAfterBackoff:
            retry(slot, after: backoff(slot), now: now, or: c, status: c.status)
        case .refreshTokenAndRetry:
            do {
                _ = try client.providerToken.expired(generation: slots[slot].generation)
                retry(slot, after: .zero, now: now, or: c, status: c.status)
            } catch {
                finish(slot, status: c.status, reason: c.reason, error: error.description)
            }
        }
    }

    /// Schedules another attempt, or ends the token with the last answer when its
    /// attempts are used up (or the batch is cancelled).
    private func retry(_ slot: Int, after delay: Duration, now: ContinuousClock.Instant,
                       or last: Completion, status: Int) {
        let s = slots[slot]
        let answered = s.attempts - s.refusals
        guard answered < client.configuration.retry.maxAttempts, s.refusals <= BatchDriver.maxRefusals,
              !cancelled
        else {
            finish(slot, status: status, reason: last.reason, timestamp: last.timestamp,
                   error: status == 0 ? last.error : nil)
            return
        }
        client.metrics.retries.increment()
        client.configuration.logger.debug("retrying", metadata: [
            "apns-id": "\(apnsID(slot))", "status": "\(status)",
            "reason": "\(last.reason?.rawValue ?? last.error ?? "")", "delay": "\(delay)",
        ])
        if delay == .zero {
            toSubmit.append(slot)
        } else {
            retries.append(Retry(due: now + delay, slot: slot))
        }
    }

    private func backoff(_ slot: Int) -> Duration {
        client.configuration.retry.backoff(afterAttempt: slots[slot].attempts, using: &rng)
    }

    // MARK: - Sending

    /// Moves due retries and new tokens into requests and submits them.
    private func fill() {
        if !retries.isEmpty {
            let now = clock.now
            var waiting: [Retry] = []
            for r in retries {
                if r.due <= now { toSubmit.append(r.slot) } else { waiting.append(r) }
            }
            retries = waiting
        }
        while !inputDone && !cancelled && !freeSlots.isEmpty && ready.count - readyHead < window {
            guard let line = input.next() else {
                inputDone = true
                break
            }
            let slot = freeSlots.removeLast()
            guard let token = DeviceToken(line) else {
                slots[slot].token = line.trimmingSpaces
                finish(slot, status: 0, reason: .badDeviceToken, error: "not 64 to 200 hex digits (even count)")
                continue
            }
            slots[slot].token = token.hex
            if let unreachable {
                finish(slot, status: 0, reason: nil, error: unreachable)
                continue
            }
            writeCStrings(slot, token: token.hex)
            toSubmit.append(slot)
        }
        submit()
    }

    private func submit() {
        guard !toSubmit.isEmpty else { return }
        let current: ProviderToken.Current
        do {
            current = try client.providerToken.current()
        } catch {
            for slot in toSubmit { finish(slot, status: 0, reason: nil, error: error.description) }
            toSubmit.removeAll()
            return
        }
        // What a server did not process goes ahead: behind new requests it would meet
        // the next connection's GOAWAY limit again, and again.
        let resends = toSubmit.filter { slots[$0].notProcessed }
        if !resends.isEmpty { toSubmit = resends + toSubmit.filter { !slots[$0].notProcessed } }
        var taken = submit(toSubmit[..<resends.count], resend: true)
        if taken == resends.count { taken += submit(toSubmit[resends.count...], resend: false) }
        let now = clock.now
        for slot in toSubmit.prefix(taken) {
            slots[slot].attempts += 1
            slots[slot].generation = current.generation
            slots[slot].notProcessed = false
            if slots[slot].firstSent == nil { slots[slot].firstSent = now }
        }
        inFlight += taken
        client.metrics.sent.increment(by: Int64(taken))
        toSubmit.removeFirst(taken)
        // Other batches hold the room: the router wakes us when some frees up.
        if !toSubmit.isEmpty { inbox.markStarved() }
    }

    /// Hands these slots' requests to the transport; returns how many it took.
    private func submit(_ run: ArraySlice<Int>, resend: Bool) -> Int {
        guard !run.isEmpty else { return 0 }
        return withUnsafeTemporaryAllocation(of: capns_request.self, capacity: run.count) { reqs in
            for (k, slot) in run.enumerated() {
                let base = arena + slot * BatchDriver.slotStride
                reqs[k] = capns_request(tag: UInt64(inbox.id) << 32 | UInt64(slot), message: message,
                                        token: UnsafePointer(base),
                                        apns_id: UnsafePointer(base + BatchDriver.tokenStride))
            }
            return client.connection.submit(UnsafeBufferPointer(reqs), resend: resend)
        }
    }

    /// Token and a fresh random (version 4) apns-id, as C strings in the slot's arena.
    private func writeCStrings(_ slot: Int, token: String) {
        let base = arena + slot * BatchDriver.slotStride
        var n = 0
        for byte in token.utf8 {
            base[n] = CChar(bitPattern: byte)
            n += 1
        }
        base[n] = 0
        var bytes = (rng.next() as UInt64, rng.next() as UInt64)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            let hex = Array("0123456789abcdef".utf8)
            let id = base + BatchDriver.tokenStride
            var out = 0
            for (i, b) in raw.enumerated() {
                if i == 4 || i == 6 || i == 8 || i == 10 {
                    id[out] = CChar(UInt8(ascii: "-"))
                    out += 1
                }
                id[out] = CChar(bitPattern: hex[Int(b >> 4)])
                id[out + 1] = CChar(bitPattern: hex[Int(b & 0xF)])
                out += 2
            }
            id[out] = 0
        }
    }

    /// writeCStrings always writes exactly CAPNS_UUID_LEN characters: no strlen needed.
    private func apnsID(_ slot: Int) -> String {
        let id = UnsafeRawPointer(arena + slot * BatchDriver.slotStride + BatchDriver.tokenStride)
        return String(decoding: UnsafeRawBufferPointer(start: id, count: Int(CAPNS_UUID_LEN)), as: UTF8.self)
    }

    // MARK: - Waiting

    /// Makes sure something wakes the consumer when the earliest retry falls due.
    private func armTimer() {
        guard let earliest = retries.map(\.due).min() else { return }
        if let timerDue, timerDue <= earliest, timerDue > clock.now { return }
        timerDue = earliest
        Task { [inbox] in
            try? await Task.sleep(until: earliest, clock: .continuous)
            inbox.poke()
        }
    }

    /// Stops reading input; tokens waiting for a retry end with their last answer.
    /// Requests in flight are still awaited: their answers are real.
    private func cancel() {
        cancelled = true
        inputDone = true
        for r in retries { finish(r.slot, status: 0, reason: nil, error: "cancelled before it was sent again") }
        retries.removeAll()
        for slot in toSubmit {
            finish(slot, status: 0, reason: nil, error: "cancelled before it was sent")
        }
        toSubmit.removeAll()
    }

    private static func makeMessage(_ n: Notification) -> OpaquePointer {
        let message = n.topic.withCString { topic in
            withOptionalCString(n.pushType.rawValue) { pushType in
                withOptionalCString(n.collapseID) { collapse in
                    n.payload.bytes.withUnsafeBufferPointer { body in
                        var spec = capns_message_spec(
                            topic: topic, push_type: pushType, priority: Int32(n.priority?.rawValue ?? 0),
                            expiration: n.expiration?.headerValue ?? -1, collapse_id: collapse,
                            payload: body.baseAddress, payload_len: body.count)
                        return capns_message_create(&spec)
                    }
                }
            }
        }
        guard let message else { fatalError("out of memory creating a message") }
        return message
    }
}
