import CoreMetrics
import Prometheus

/// What `GET /metrics` shows (Prometheus text): deliveries by app, type and
/// reason, the APNs latency, the outbox depth, and, through swift-metrics, the
/// engine's own counters (apns_*).
final class ServiceMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    let latency: DurationHistogram
    let outboxDepth: Prometheus.Gauge
    let known: [String: Set<String>]

    init(registry: PrometheusCollectorRegistry, config: ServerConfig) {
        self.registry = registry
        latency = registry.makeDurationHistogram(
            name: "apns_server_delivery_latency_seconds",
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10)],
            help: "From sending a delivery to APNs' final answer (engine retries included)")
        outboxDepth = registry.makeGauge(name: "apns_server_outbox_depth", help: "Deliveries pending in the outbox")
        known = Dictionary(uniqueKeysWithValues: config.apps.map { ($0.appType, Set($0.preferenceByType.map(\.type))) })
    }

    /// A final outcome. A type the app's config does not list is counted as "other":
    /// the backend's strings must not grow the label set without bound.
    func finished(app: String, type: String, delivered: Bool, reason: String?) {
        let typeLabel = known[app]?.contains(type) == true ? type : "other"
        registry.makeCounter(
            name: "apns_server_deliveries_total",
            labels: [("app", app), ("type", typeLabel), ("result", delivered ? "delivered" : "failed"),
                     ("reason", delivered ? "Success" : (reason ?? "Unknown"))],
            help: "Deliveries that reached a final state").increment()
    }

    /// A delivery given back to the outbox for a later attempt (no answer, or APNs busy).
    func released(app: String, reason: String) {
        registry.makeCounter(name: "apns_server_deliveries_released_total", labels: [("app", app), ("reason", reason)],
                             help: "Deliveries put back in the outbox without a final answer").increment()
    }

    func notification(app: String, deliveries: Int) {
        registry.makeCounter(name: "apns_server_notifications_total", labels: [("app", app)],
                             help: "Notifications accepted").increment()
        registry.makeCounter(name: "apns_server_deliveries_enqueued_total", labels: [("app", app)],
                             help: "Deliveries written to the outbox").increment(by: Int64(deliveries))
    }
}
