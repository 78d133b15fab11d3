import CAPNs
import Synchronization

/// One C sender: the HTTP/2 connection(s) to one environment and the thread that
/// drives them. Requests go in with `submit`; answers come back on the sender
/// thread and are routed to the batch that sent them (`Router`).
final class Connection: Sendable {
    // Owned by this object; the C API is safe to call from any thread.
    nonisolated(unsafe) private let sender: OpaquePointer
    let router: Router
    private let destroyed = Atomic<Bool>(false)
    private let final = Mutex<capns_sender_stats?>(nil)

    init(configuration c: APNsClient.Configuration, router: Router) throws(APNsError) {
        self.router = router
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let host = c.environment.host, caFile = c.caFile
        let created: OpaquePointer? = host.withCString { hostPtr in
            withOptionalCString(caFile) { caPtr in
                var cfg = capns_sender_config()
                cfg.transport = c.transport == .nghttp2 ? CAPNS_TRANSPORT_NGHTTP2 : CAPNS_TRANSPORT_CURL
                cfg.host = hostPtr
                cfg.port = UInt16(clamping: c.environment.port)
                cfg.ca_file = caPtr
                cfg.connections = Int32(max(1, c.connections))
                cfg.max_outstanding = Int32(clamping: c.outstandingLimit)
                cfg.max_streams = Int32(clamping: max(1, c.maxInFlight))
                cfg.connect_timeout_ms = Int32(clamping: c.connectTimeout.milliseconds)
                cfg.request_timeout_ms = Int32(clamping: c.requestTimeout.milliseconds)
                cfg.ping_interval_ms = Int32(clamping: c.pingInterval.milliseconds)
                cfg.on_complete = { ctx, batch, count in
                    guard let ctx, let batch else { return }
                    Unmanaged<Router>.fromOpaque(ctx).takeUnretainedValue()
                        .deliver(UnsafeBufferPointer(start: batch, count: count))
                }
                cfg.ctx = Unmanaged.passUnretained(router).toOpaque()
                return capns_sender_create(&cfg, &err, err.count)
            }
        }
        guard let created else { throw .transport(String(cChars: err)) }
        sender = created
    }

    deinit { destroy() }

    /// Hands requests to the sender thread; returns how many it took. `resend`: they
    /// were sent before and not processed, and go ahead of requests not sent yet.
    func submit(_ requests: UnsafeBufferPointer<capns_request>, resend: Bool = false) -> Int {
        guard let base = requests.baseAddress, !requests.isEmpty else { return 0 }
        router.willSubmit(requests.count)
        let taken = resend ? capns_sender_resubmit(sender, base, requests.count)
                           : capns_sender_submit(sender, base, requests.count)
        if taken < requests.count { router.willSubmit(taken - requests.count) }
        return taken
    }

    func setAuthorization(_ jwt: String) {
        capns_sender_set_authorization(sender, jwt)
    }

    /// Live while the sender runs; afterwards the figures it ended with (the C
    /// sender is freed by `destroy`, so it must not be read then).
    func statistics() -> capns_sender_stats {
        final.withLock { last in
            if let last { return last }
            var stats = capns_sender_stats()
            capns_sender_get_stats(sender, &stats)
            return stats
        }
    }

    /// Stops the thread; unanswered requests complete as cancelled first.
    func destroy() {
        if destroyed.exchange(true, ordering: .acquiringAndReleasing) { return }
        final.withLock { last in
            // After a drain nothing changes but the teardown itself: keep the figures.
            var stats = capns_sender_stats()
            capns_sender_get_stats(sender, &stats)
            capns_sender_destroy(sender)
            last = stats
        }
    }
}

/// `withCString` for an optional: nil stays a NULL pointer.
func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString(body)
}

/// A completion as Swift keeps it: the slot it answers and what happened.
struct Completion: Sendable {
    let slot: Int
    let outcome: capns_outcome
    let status: Int
    let timestamp: Int64?
    let uniqueID: String?
    let reason: Reason?
    let error: String?

    init(_ c: capns_completion) {
        var c = c
        slot = Int(c.tag & 0xFFFF_FFFF)
        outcome = capns_outcome(rawValue: UInt32(bitPattern: c.outcome))
        status = Int(c.status)
        timestamp = c.timestamp_ms >= 0 ? c.timestamp_ms : nil
        uniqueID = Completion.string(&c.unique_id)
        reason = Completion.string(&c.reason).map(Reason.init(rawValue:))
        error = Completion.string(&c.error)
    }

    private static func string<T>(_ tuple: inout T) -> String? {
        withUnsafeBytes(of: &tuple) { raw -> String? in
            guard raw.first != 0 else { return nil }
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

/// Routes completions from the sender thread to the batches that sent them, and
/// counts what is outstanding so that shutdown can wait for it.
final class Router: Sendable {
    private struct State {
        var inboxes: [UInt32: Inbox] = [:]
        var nextID: UInt32 = 1
        var outstanding = 0
        var drainWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// A new inbox under an id no live batch uses (the id is the high half of a tag).
    func makeInbox() -> Inbox {
        state.withLock { s in
            repeat { s.nextID &+= 1 } while s.nextID == 0 || s.inboxes[s.nextID] != nil
            let inbox = Inbox(id: s.nextID)
            s.inboxes[s.nextID] = inbox
            return inbox
        }
    }

    func unregister(_ id: UInt32) {
        _ = state.withLock { $0.inboxes.removeValue(forKey: id) }
    }

    func willSubmit(_ count: Int) {
        state.withLock { $0.outstanding += count }
    }

    /// On the sender thread: one lock round trip per C batch, one per batch inbox.
    func deliver(_ batch: UnsafeBufferPointer<capns_completion>) {
        var groups: [UInt32: [Completion]] = [:]
        for c in batch { groups[UInt32(truncatingIfNeeded: c.tag >> 32), default: []].append(Completion(c)) }
        let (targets, waiters) = state.withLock { s -> ([(Inbox, [Completion])], [CheckedContinuation<Void, Never>]) in
            s.outstanding -= batch.count
            var waiters: [CheckedContinuation<Void, Never>] = []
            if s.outstanding == 0 { swap(&waiters, &s.drainWaiters) }
            // Room was freed: batches that could not submit everything try again.
            let targets = groups.compactMap { id, items in s.inboxes[id].map { ($0, items) } }
            for inbox in s.inboxes.values where groups[inbox.id] == nil { inbox.pokeIfStarved() }
            return (targets, waiters)
        }
        for (inbox, items) in targets { inbox.push(items) }
        for w in waiters { w.resume() }
    }

    /// Returns once every submitted request has completed.
    func drained() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let done = state.withLock { s -> Bool in
                if s.outstanding == 0 { return true }
                s.drainWaiters.append(c)
                return false
            }
            if done { c.resume() }
        }
    }
}

/// Where one batch's completions wait for its consumer. The sender thread pushes;
/// the consumer takes them all at once, or sleeps until there are some.
final class Inbox: Sendable {
    private struct State {
        var items: [Completion] = []
        var waiter: CheckedContinuation<Void, Never>?
        var poked = false
        var starved = false

        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            guard let w = waiter else { return nil }
            waiter = nil
            poked = false
            return w
        }
    }

    private let state = Mutex(State())
    let id: UInt32

    init(id: UInt32) { self.id = id }

    func push(_ items: [Completion]) {
        let waiter = state.withLock { s in
            s.items.append(contentsOf: items)
            s.starved = false
            return s.takeWaiter()
        }
        waiter?.resume()
    }

    /// Wakes the consumer: a retry fell due, or the task was cancelled.
    func poke() {
        let waiter = state.withLock { s in
            s.poked = true
            return s.takeWaiter()
        }
        waiter?.resume()
    }

    func pokeIfStarved() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard s.starved else { return nil }
            s.starved = false
            s.poked = true
            return s.takeWaiter()
        }
        waiter?.resume()
    }

    /// The consumer could not submit everything: wake it when room frees up.
    func markStarved() {
        state.withLock { $0.starved = true }
    }

    func take() -> [Completion] {
        state.withLock { s in
            var items: [Completion] = []
            swap(&items, &s.items)
            return items
        }
    }

    /// Sleeps until completions arrive or a poke.
    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
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

extension String {
    /// A NUL-terminated C buffer's text (C error lines, tokens).
    init(cChars buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
