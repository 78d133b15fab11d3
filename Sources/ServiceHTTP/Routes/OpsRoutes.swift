import Hummingbird
import Prometheus
import ServiceCore
import Store
import Synchronization

/// `GET /health`, with no credentials (for load balancers), and `GET /metrics` (for
/// Prometheus), which takes a bearer: the `metrics_token_file` token when the config
/// names one, or one of the API keys. The metrics say how much is sent for which app
/// and how the service is doing: not for anyone who can reach the port. Serving
/// them costs no database query (`OutboxGauges` counts the outbox on its own clock).
/// `GET /openapi.json`, with no credentials: the API's description (`OpenAPIDocument`).
package struct OpsRoutes: Sendable {
    let metrics: ServiceMetrics
    let auth: Auth
    let metricsToken: MetricsToken?
    /// The apps whose types the served OpenAPI document lists.
    let appTypes: [String]

    package func register(on router: Router<ServiceContext>) {
        router.get("health") { _, _ -> Response in
            JSONResponse.ok(.object([("status", .string("ok"))]))
        }
        // Made at the first request, not at start: most servers are never asked.
        let document = LazyBytes { [appTypes] in OpenAPIDocument.served(appTypes: appTypes) }
        router.get("openapi.json") { _, _ -> Response in
            Response(status: .ok, headers: JSONResponse.contentType, body: .init(byteBuffer: ByteBuffer(bytes: document.value)))
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

/// Bytes made once, by the first reader.
private final class LazyBytes: Sendable {
    private let make: @Sendable () -> [UInt8]
    private let made = Mutex<[UInt8]?>(nil)

    init(_ make: @escaping @Sendable () -> [UInt8]) {
        self.make = make
    }

    var value: [UInt8] {
        made.withLock { made in
            if let made { return made }
            let bytes = make()
            made = bytes
            return bytes
        }
    }
}

/// The `metrics_token_file` token, kept as an HMAC under a per-process random key and
/// compared in constant time (as `Auth` compares API keys).
package struct MetricsToken: Sendable {
    private let key: [UInt8]
    private let digest: [UInt8]

    package init(_ token: [UInt8]) {
        var key = [UInt8](repeating: 0, count: 32)
        for i in key.indices { key[i] = UInt8.random(in: 0...255) }
        self.key = key
        digest = HMACSHA256.mac(key: key, token)
    }

    func matches(_ credential: String) -> Bool {
        Auth.equal(HMACSHA256.mac(key: key, Array(credential.utf8)), digest)
    }
}
