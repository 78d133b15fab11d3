import CAPNs
import Foundation
import TestSupport

/// One completion as the tests look at it.
struct Completion: Sendable {
    let tag: UInt64
    let outcome: capns_outcome
    let status: Int32
    let error: String
}

/// Collects completions from the sender thread; tests await a count of them.
final class Collector: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [Completion] = []
    private var waiters: [(Int, CheckedContinuation<Void, Never>)] = []

    var completions: [Completion] { lock.withLock { items } }

    func add(_ batch: UnsafePointer<capns_completion>, _ count: Int) {
        var ready: [CheckedContinuation<Void, Never>] = []
        lock.withLock {
            for i in 0..<count {
                var c = batch[i]
                let error = withUnsafeBytes(of: &c.error) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                items.append(Completion(tag: c.tag, outcome: capns_outcome(UInt32(c.outcome)),
                                        status: c.status, error: error))
            }
            waiters.removeAll { waiter in
                if items.count >= waiter.0 { ready.append(waiter.1); return true }
                return false
            }
        }
        ready.forEach { $0.resume() }
    }

    /// Waits until `count` completions arrived or `seconds` passed (the test then sees fewer).
    func wait(for count: Int, seconds: Double = 60) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = lock.withLock {
                if items.count >= count { return true }
                waiters.append((count, continuation))
                return false
            }
            if done { continuation.resume(); return }
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                let expired = lock.withLock { () -> CheckedContinuation<Void, Never>? in
                    guard let i = waiters.firstIndex(where: { $0.0 == count }) else { return nil }
                    return waiters.remove(at: i).1
                }
                expired?.resume()
            }
        }
    }
}

private let onComplete: capns_completion_fn = { ctx, batch, count in
    Unmanaged<Collector>.fromOpaque(ctx!).takeUnretainedValue().add(batch!, count)
}

/// A capns_sender on the curl transport, talking to 127.0.0.1:port.
final class TestSender: @unchecked Sendable {
    let collector: Collector
    private let sender: OpaquePointer
    private let message: OpaquePointer
    private var destroyed = false

    init(port: UInt16, caFile: String? = TestPKI.shared.caFile, maxOutstanding: Int32 = 1000,
         connectTimeoutMs: Int32 = 5000, requestTimeoutMs: Int32 = 20000) throws {
        let collector = Collector()
        self.collector = collector
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let created: OpaquePointer? = "127.0.0.1".withCString { host in
            withOptionalCString(caFile) { ca in
                var cfg = capns_sender_config()
                cfg.transport = CAPNS_TRANSPORT_CURL
                cfg.host = host
                cfg.port = port
                cfg.ca_file = ca
                cfg.connections = 1
                cfg.max_outstanding = maxOutstanding
                cfg.connect_timeout_ms = connectTimeoutMs
                cfg.request_timeout_ms = requestTimeoutMs
                cfg.on_complete = onComplete
                cfg.ctx = Unmanaged.passUnretained(collector).toOpaque()
                return capns_sender_create(&cfg, &err, err.count)
            }
        }
        guard let created else { throw HarnessError(message: text(err)) }
        sender = created
        capns_sender_set_authorization(sender, "test.jwt.only")
        let payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
        message = payload.withUnsafeBufferPointer { bytes in
            "com.example.app".withCString { topic in
                "alert".withCString { pushType in
                    var spec = capns_message_spec()
                    spec.topic = topic
                    spec.push_type = pushType
                    spec.priority = 10
                    spec.expiration = -1
                    spec.payload = bytes.baseAddress
                    spec.payload_len = bytes.count
                    return capns_message_create(&spec)!
                }
            }
        }
    }

    /// Submits requests tagged 0..<count, retrying while the queue is full (off the pool).
    func submit(count: Int) async {
        await offPool { [self] in
            let token = String(repeating: "ab", count: 32)
            var tag = 0
            while tag < count {
                let taken = token.withCString { tok in
                    "123e4567-e89b-12d3-a456-426614174000".withCString { id in
                        var r = capns_request(tag: UInt64(tag), message: message, token: tok, apns_id: id)
                        return capns_sender_submit(sender, &r, 1)
                    }
                }
                if taken == 1 { tag += 1 } else { usleep(1000) }
            }
        }
    }

    var stats: capns_sender_stats {
        var s = capns_sender_stats()
        capns_sender_get_stats(sender, &s)
        return s
    }

    /// Stops the sender; blocks on its thread, so it runs off the cooperative pool.
    func destroy() async {
        guard !destroyed else { return }
        destroyed = true
        await offPool { [self] in capns_sender_destroy(sender) }
    }

    deinit {
        if !destroyed { capns_sender_destroy(sender) }
        capns_message_release(message)
    }
}

/// A NUL-terminated C buffer as a String.
func text(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

struct HarnessError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

/// Runs blocking work on a Dispatch thread and awaits it.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(returning: work()) }
    }
}
