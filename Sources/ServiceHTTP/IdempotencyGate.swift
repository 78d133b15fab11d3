import Foundation
import HTTPTypes
import Hummingbird
import ServiceCore
import Store

/// `Idempotency-Key` on the backend's `POST`s that create work: a request sent
/// again with the same key (a retry after a timeout) gets the first one's status
/// and body, and creates and sends nothing new.
///
/// Keys are scoped by the API key that sent them: by its name (a rotated secret
/// with the same name replays), or for a bare key line by the secret's keyed hash
/// (never the secret itself), so two backends never see each other's answers. The store inserts the
/// key's row before the work starts: of requests racing with one key, on any
/// instance, one holds it and the others wait for its answer. The work names what
/// it creates by the row's resource id, and that id's own primary key (a
/// notification's, a broadcast's) commits in the work's transaction, so a request
/// that takes over the key of one that died mid-way cannot commit the work twice.
struct IdempotencyGate: Sendable {
    let store: any DeliveryStore
    let clock: any ServiceClock
    let retentionHours: Int

    static let header = HTTPField.Name("Idempotency-Key")!
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!
    static let maxKeyBytes = 255
    /// How long a request holds its key without an answer before a retry may take
    /// it over: longer than any fan-out takes, short enough for a retry after a crash.
    static let leaseMillis: Int64 = 120_000
    /// How long a duplicate waits for the first request's answer before a 409.
    static let waitForFirst: Duration = .seconds(15)
    /// A duplicate looks again when the first request answers in this process
    /// (`IdempotencyWakeups`), or after a wait that doubles from the first to the
    /// last of these: the first request may be on another instance.
    static let firstLook: Duration = .milliseconds(25)
    static let longestLook: Duration = .seconds(1)
    static let wakeups = IdempotencyWakeups()

    /// What the guarded work answered: replayed as is to the key's later requests.
    struct Answer: Sendable {
        var status: HTTPResponse.Status
        var body: JSON
    }

    /// Runs `work` once per key and answers every request with that key alike.
    /// Without a key, `work` runs with a new resource id. `work` gets the id to give
    /// what it creates, and whether an earlier holder of the key may have created
    /// it already (it then answers from what exists rather than create it again).
    ///
    /// Call it once the request is checked: a 400 stores no key. A request that
    /// fails (an error thrown, a 5xx) gives its key back, so a retry runs anew.
    func run(_ request: Request, context: ServiceContext, body: JSON,
             _ work: (_ resourceID: String, _ resumed: Bool) async throws -> Answer) async throws -> Response {
        let newID = UUID().uuidString.lowercased()
        guard let key = context.idempotencyKey else {
            context.audit.target = newID
            let answer = try await work(newID, false)
            return JSONResponse.make(answer.status, answer.body)
        }
        let secret = Auth.bearer(request) ?? ""
        let scope = context.apiKey?.idempotencyScope(secret: secret) ?? Self.scope(secret)
        let fingerprint = Self.fingerprint(method: request.method.rawValue, path: request.uri.path, body: body)
        let waitUntil = ContinuousClock.now + Self.waitForFirst
        let waiting = scope + "\n" + key
        var look = Self.firstLook
        while true {
            let now = clock.nowMillis
            let claim = try await store.claimIdempotencyKey(
                scope: scope, key: key, fingerprint: fingerprint, resourceID: newID, now: now,
                leaseMillis: Self.leaseMillis, expiredBefore: now - Int64(retentionHours) * 3_600_000)
            switch claim {
            case .answered(let held, let status, let bytes):
                guard held == fingerprint else { throw Self.mismatch }
                var response = Response(status: HTTPResponse.Status(code: status), headers: JSONResponse.contentType,
                                        body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
                response.headers[Self.replayedHeader] = "true"
                return response
            case .busy(let held):
                guard held == fingerprint else { throw Self.mismatch }
                guard ContinuousClock.now < waitUntil else {
                    var response = APIError.conflict("a request with this Idempotency-Key is still being processed; retry shortly").response
                    response.headers[.retryAfter] = "1"
                    return response
                }
                await Self.wakeups.wait(waiting, atMost: min(look, waitUntil - ContinuousClock.now))
                try Task.checkCancellation()
                look = min(look * 2, Self.longestLook)
            case .claimed(let resourceID, let resumed):
                context.audit.target = resourceID
                // Whatever this request ends in, those waiting on its key look again.
                defer { Self.wakeups.wake(waiting) }
                let answer: Answer
                do {
                    answer = try await work(resourceID, resumed)
                } catch {
                    try? await store.releaseIdempotencyKey(scope: scope, key: key, resourceID: resourceID)
                    throw error
                }
                if answer.status.code >= 500 {
                    try await store.releaseIdempotencyKey(scope: scope, key: key, resourceID: resourceID)
                } else {
                    // Recorded before it is sent: a client that saw this answer gets it again.
                    try await store.answerIdempotencyKey(scope: scope, key: key, resourceID: resourceID,
                                                         status: Int(answer.status.code), body: answer.body.bytes)
                }
                return JSONResponse.make(answer.status, answer.body)
            }
        }
    }

    static let mismatch = APIError(
        status: .unprocessableContent,
        message: "Idempotency-Key was already used for a different request (another method, path or body): use a new key for a new request")

    /// The API key's keyed hash: stable across restarts and instances, and no use
    /// to anyone who reads the database.
    static func scope(_ credential: String) -> String {
        HMACSHA256.hex(HMACSHA256.mac(key: Array("apns-server idempotency scope".utf8), Array(credential.utf8)))
    }

    /// A named key's scope: its name's keyed hash, which no secret's can equal.
    static func scope(name: String) -> String {
        HMACSHA256.hex(HMACSHA256.mac(key: Array("apns-server idempotency key name".utf8), Array(name.utf8)))
    }

    /// What must match for a key's later request to be "the same request".
    static func fingerprint(method: String, path: String, body: JSON) -> String {
        HMACSHA256.hex(HMACSHA256.mac(key: Array("apns-server idempotency request".utf8),
                                      Array("\(method) \(path)\n".utf8) + body.bytes))
    }
}

/// Reads `Idempotency-Key` once, before the route: 1 to 255 bytes of visible ASCII
/// into `ServiceContext.idempotencyKey`, or a 400 before anything is read or stored.
/// On the routes that create work (behind the API key's own middleware); others
/// ignore the header.
struct IdempotencyKeyMiddleware: RouterMiddleware {
    func handle(_ request: Request, context: ServiceContext,
                next: (Request, ServiceContext) async throws -> Response) async throws -> Response {
        var context = context
        context.idempotencyKey = try Self.key(request)
        return try await next(request, context)
    }

    /// The request's key, checked; nil without one.
    static func key(_ request: Request) throws(APIError) -> String? {
        guard let value = request.headers[IdempotencyGate.header] else { return nil }
        guard !value.isEmpty, value.utf8.count <= IdempotencyGate.maxKeyBytes else {
            throw .badRequest("Idempotency-Key must be 1 to \(IdempotencyGate.maxKeyBytes) bytes")
        }
        guard value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            throw .badRequest("Idempotency-Key must be printable ASCII")
        }
        return value
    }
}
