import CAPNs
import Synchronization

/// One C sender: the HTTP/2 connection(s) to one endpoint and the thread that
/// drives them. Requests go in with `submit`; answers come back on the sender
/// thread, in batches, to `onComplete`.
///
/// Not thread-safe on its own by design: its one owner (`Lane`) calls `submit` and
/// `setAuthorization` only under its lock, and `destroy` only after setting, under
/// that same lock, the flag that stops every further call. That is what makes a
/// call into a freed C sender impossible.
final class Connection: Sendable {
    nonisolated(unsafe) private let sender: OpaquePointer
    private let destroyed = Atomic<Bool>(false)
    private let final = Mutex<capns_sender_stats?>(nil)
    /// Keeps the completion handler alive for as long as the C thread may call it.
    private let handler: CompletionHandler

    /// Receives the sender thread's completion batches.
    final class CompletionHandler: Sendable {
        let body: @Sendable (UnsafeBufferPointer<capns_completion>) -> Void
        init(_ body: @escaping @Sendable (UnsafeBufferPointer<capns_completion>) -> Void) { self.body = body }
    }

    init(configuration c: APNsClient.Configuration, endpoint: Endpoint,
         onComplete: @escaping @Sendable (UnsafeBufferPointer<capns_completion>) -> Void) throws(APNsError) {
        handler = CompletionHandler(onComplete)
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let caFile = c.caFile, ctx = Unmanaged.passUnretained(handler).toOpaque()
        let proxy = ProxyCStrings(c.proxy, for: endpoint)
        let created: OpaquePointer? = endpoint.host.withCString { hostPtr in
            withOptionalCString(caFile) { caPtr in
                var cfg = capns_sender_config()
                cfg.transport = c.transport == .nghttp2 ? CAPNS_TRANSPORT_NGHTTP2 : CAPNS_TRANSPORT_CURL
                cfg.host = hostPtr
                cfg.port = UInt16(clamping: endpoint.port)
                cfg.ca_file = caPtr
                cfg.connections = Int32(max(1, c.connections))
                cfg.max_outstanding = Int32(clamping: c.outstandingLimit)
                cfg.max_streams = Int32(clamping: max(1, c.maxInFlight))
                cfg.connect_timeout_ms = Int32(clamping: c.connectTimeout.milliseconds)
                cfg.request_timeout_ms = Int32(clamping: c.requestTimeout.milliseconds)
                cfg.ping_interval_ms = Int32(clamping: c.pingInterval.milliseconds)
                cfg.on_complete = { ctx, batch, count in
                    guard let ctx, let batch else { return }
                    Unmanaged<CompletionHandler>.fromOpaque(ctx).takeUnretainedValue()
                        .body(UnsafeBufferPointer(start: batch, count: count))
                }
                cfg.ctx = ctx
                // Certificate auth: the sender retains the identity for as long as it runs.
                if case .certificate(let certificate) = c.credentials { cfg.identity = certificate.handle }
                proxy.apply(to: &cfg)
                return withExtendedLifetime(proxy) { capns_sender_create(&cfg, &err, err.count) }
            }
        }
        guard let created else { throw .transport(String(cChars: err)) }
        sender = created
    }

    deinit { destroy() }

    /// Hands requests to the sender thread; returns how many it took. `resend`: they
    /// were sent before and not processed, and go ahead of requests not sent yet.
    /// Only under the owner's lock, never after `destroy`.
    func submit(_ requests: UnsafeBufferPointer<capns_request>, resend: Bool) -> Int {
        guard let base = requests.baseAddress, !requests.isEmpty else { return 0 }
        return resend ? capns_sender_resubmit(sender, base, requests.count)
                      : capns_sender_submit(sender, base, requests.count)
    }

    /// Runs `job` on the sender thread (`capns_sender_post`); false once the thread
    /// has ended. Never after `destroy` (the owner's guard sees to it).
    func post(_ job: SenderExecutor.Posted) -> Bool {
        let ctx = Unmanaged.passRetained(job).toOpaque()
        let posted = capns_sender_post(sender, { ctx in
            guard let ctx else { return }
            Unmanaged<SenderExecutor.Posted>.fromOpaque(ctx).takeRetainedValue().run()
        }, ctx)
        if posted == 0 { return true }
        Unmanaged<SenderExecutor.Posted>.fromOpaque(ctx).release()
        return false
    }

    /// Whether the calling thread is the sender thread. Never after `destroy`.
    var isCurrent: Bool { capns_sender_is_current(sender) != 0 }

    /// Only under the owner's lock, never after `destroy`.
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

    /// Stops the thread; unanswered requests complete as cancelled first, through
    /// the handler, on the sender thread: the caller must not hold a lock the
    /// handler takes.
    func destroy() {
        if destroyed.exchange(true, ordering: .acquiringAndReleasing) { return }
        final.withLock { last in
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

/// A completion's text fields, read only when a result needs them.
extension capns_completion {
    /// The slot a request was submitted from (its tag).
    var slot: Int { Int(tag & 0xFFFF_FFFF) }
    var outcomeValue: capns_outcome { capns_outcome(rawValue: UInt32(bitPattern: outcome)) }
    var timestampValue: Int64? { timestamp_ms >= 0 ? timestamp_ms : nil }

    var reasonValue: Reason? { capnsString(reason).map(Reason.init(rawValue:)) }
    var uniqueIDValue: String? { capnsString(unique_id) }
    var errorValue: String? { capnsString(error) }

    /// The lane's state machine's view of it; a 200's reason is not read.
    var answer: LaneAnswer {
        switch outcomeValue {
        case CAPNS_ANSWERED:
            let status = Int(self.status)
            return .answered(status: status, reason: status == 200 ? nil : reasonValue, timestamp: timestampValue,
                             uniqueID: uniqueIDValue)
        case CAPNS_NOT_PROCESSED: return .notProcessed(error: errorValue)
        case CAPNS_TIMED_OUT: return .timedOut(error: errorValue)
        case CAPNS_CONNECT_FAILED: return .connectFailed(error: errorValue)
        default: return .cancelled(error: errorValue)
        }
    }
}

/// A fixed C char array (imported as a tuple) as a String; nil when empty.
private func capnsString<T>(_ tuple: T) -> String? {
    var tuple = tuple
    return withUnsafeBytes(of: &tuple) { raw -> String? in
        guard raw.first != 0 else { return nil }
        return String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
}

extension String {
    /// A NUL-terminated C buffer's text (C error lines, tokens).
    init(cChars buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
