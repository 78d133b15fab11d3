import Hummingbird
import Prometheus
import Store

/// `GET /health` and `GET /metrics`: no credentials (they reveal no user data),
/// for load balancers and Prometheus.
struct OpsRoutes: Sendable {
    let store: any DeliveryStore
    let metrics: ServiceMetrics

    func register(on router: Router<ServiceContext>) {
        router.get("health") { _, _ -> Response in
            JSONResponse.ok(.object([("status", .string("ok"))]))
        }
        router.get("metrics") { _, context -> Response in
            // The depth is read at scrape time: the outbox is the truth, not a counter.
            do {
                metrics.outboxDepth.set(Int64(try await store.outboxDepth()))
                metrics.outboxWaiting.set(Int64(try await store.outboxWaiting(now: Clock.nowMillis)))
            } catch {
                context.logger.warning("outbox depth unavailable", metadata: ["error": "\(error)"])
            }
            var out: [UInt8] = []
            metrics.registry.emit(into: &out)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(bytes: out)))
        }
    }
}
