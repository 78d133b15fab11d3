import Hummingbird
import Prometheus
import Store

/// `GET /health`, with no credentials (for load balancers), and `GET /metrics` (for
/// Prometheus), which takes a bearer: the `metrics_token_file` token when the config
/// names one, or one of the API keys. The metrics say how much is sent for which app
/// and how the service is doing: not for anyone who can reach the port. Serving
/// them costs no database query (`OutboxGauges` counts the outbox on its own clock).
/// `GET /openapi.json`, with no credentials: the API's description (`OpenAPIDocument`).
struct OpsRoutes: Sendable {
    let metrics: ServiceMetrics
    let auth: Auth
    let metricsToken: MetricsToken?
    /// The served OpenAPI document, made once at start.
    let document: [UInt8]

    func register(on router: Router<ServiceContext>) {
        router.get("health") { _, _ -> Response in
            JSONResponse.ok(.object([("status", .string("ok"))]))
        }
        router.get("openapi.json") { [document] _, _ -> Response in
            Response(status: .ok, headers: JSONResponse.contentType, body: .init(byteBuffer: ByteBuffer(bytes: document)))
        }
        router.get("metrics") { [auth, metricsToken, metrics] request, _ -> Response in
            guard let credential = Auth.bearer(request) else { throw APIError.unauthorized("missing bearer token") }
            // Both compared, whichever matches: the time says nothing of which.
            let isToken = metricsToken?.matches(credential) ?? false
            let isKey = auth.isAPIKey(credential)
            guard isToken || isKey else { throw APIError.unauthorized("invalid bearer token") }
            var out: [UInt8] = []
            metrics.registry.emit(into: &out)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
    }
}

/// The `metrics_token_file` token, kept as an HMAC under a per-process random key and
/// compared in constant time (as `Auth` compares API keys).
struct MetricsToken: Sendable {
    private let key: [UInt8]
    private let digest: [UInt8]

    init(_ token: [UInt8]) {
        var key = [UInt8](repeating: 0, count: 32)
        for i in key.indices { key[i] = UInt8.random(in: 0...255) }
        self.key = key
        digest = HMACSHA256.mac(key: key, token)
    }

    func matches(_ credential: String) -> Bool {
        Auth.equal(HMACSHA256.mac(key: key, Array(credential.utf8)), digest)
    }
}
