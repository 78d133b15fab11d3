import CoreMetrics
import Prometheus
import Store

/// What `GET /metrics` shows (Prometheus text): deliveries by app, type and
/// reason, the APNs latency, the outbox depth, and, through swift-metrics, the
/// engine's own counters (apns_*).
package final class ServiceMetrics: Sendable {
    package let registry: PrometheusCollectorRegistry
    package let latency: DurationHistogram
    package let outboxDepth: Prometheus.Gauge
    package let outboxWaiting: Prometheus.Gauge
    package let outboxOldestDue: Prometheus.Gauge
    let known: [String: Set<String>]
    /// The same outcomes, second by second over the last hour (the console's chart).
    package let rates: DeliveryRates

    package init(registry: PrometheusCollectorRegistry, config: ServerConfig, clock: any ServiceClock = SystemClock()) {
        self.registry = registry
        rates = DeliveryRates(clock: clock)
        latency = registry.makeDurationHistogram(
            descriptor: .init(namespace: "apns_server", metricName: "delivery_latency", unitName: "seconds",
                              helpText: "From sending a delivery to APNs' final answer (engine retries included)"),
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10)])
        outboxDepth = registry.makeGauge(descriptor: .init(namespace: "apns_server", metricName: "outbox_depth", unitName: "",
                                                           helpText: "Deliveries pending in the outbox"))
        outboxWaiting = registry.makeGauge(descriptor: .init(
            namespace: "apns_server", metricName: "outbox_waiting", unitName: "",
            helpText: "Deliveries in the outbox not due yet (quiet hours, batching windows, retry backoff)"))
        outboxOldestDue = registry.makeGauge(descriptor: .init(
            namespace: "apns_server", metricName: "outbox_oldest_due", unitName: "seconds",
            helpText: "How long the longest-due delivery in the outbox has been due (0: none due)"))
        known = Dictionary(uniqueKeysWithValues: config.apps.map {
            ($0.appType, Set($0.preferenceByType.map(\.type)).union($0.types.keys))
        })
    }

    /// A final outcome. A type the app's config does not list is counted as "other":
    /// the backend's strings must not grow the label set without bound.
    package func finished(app: String, type: String, delivered: Bool, reason: String?, count: Int = 1) {
        let typeLabel = known[app]?.contains(type) == true ? type : "other"
        counter("apns_server_deliveries_total", "Deliveries that reached a final state",
                [("app", app), ("type", typeLabel), ("result", delivered ? "delivered" : "failed"),
                 ("reason", delivered ? "Success" : (reason ?? "Unknown"))]).increment(by: Int64(count))
        rates.record(delivered: delivered, reason: reason, count: count)
    }

    /// A delivery given back to the outbox for a later attempt (no answer, or APNs busy).
    package func released(app: String, reason: String) {
        counter("apns_server_deliveries_released_total", "Deliveries put back in the outbox without a final answer",
                [("app", app), ("reason", reason)]).increment()
    }

    /// APNs refused the app's provider key for the environment it was sent to: a
    /// configuration error to alert on (the deliveries wait in the outbox).
    package func keyRefused(app: String, reason: String) {
        counter("apns_server_key_refused_total",
                "Deliveries put back because APNs refused the provider key for that environment",
                [("app", app), ("reason", reason)]).increment()
    }

    package func notification(app: String, deliveries: Int) {
        counter("apns_server_notifications_total", "Notifications accepted", [("app", app)]).increment()
        counter("apns_server_deliveries_enqueued_total", "Deliveries written to the outbox", [("app", app)])
            .increment(by: Int64(deliveries))
    }

    /// One attempt to send a webhook event: delivered, retry (failed, tried again
    /// later) or failed (for good).
    package func webhookDelivery(event: String, outcome: String) {
        counter("apns_server_webhook_deliveries_total", "Webhook attempts by event type and outcome",
                [("event", event), ("outcome", outcome)]).increment()
    }

    /// Webhook events not delivered yet (pending) and given up on (failed).
    package func webhookEvents(_ counts: [String: Int]) {
        for state in ["pending", "failed"] {
            registry.makeGauge(descriptor: .init(namespace: "apns_server", metricName: "webhook_events", unitName: "",
                                                 helpText: "Webhook events pending (not yet delivered) or failed (given up)"),
                               labels: [("state", state)]).set(Double(counts[state, default: 0]))
        }
    }

    /// A receipt or an open a device reported for the first time.
    package func notificationEvent(app: String, type: String, event: String) {
        let typeLabel = known[app]?.contains(type) == true ? type : "other"
        counter("apns_server_notification_events_total", "Deliveries devices reported received or opened",
                [("app", app), ("type", typeLabel), ("event", event)]).increment()
    }

    /// The registry keeps one counter per name and labels; this finds or makes it.
    /// What retention removed from the log.
    package func pruned(_ result: PruneResult) {
        counter("apns_server_log_pruned_total", "Finished log entries removed by retention", [("kind", "notification")])
            .increment(by: Int64(result.notifications))
        counter("apns_server_log_pruned_total", "Finished log entries removed by retention", [("kind", "delivery")])
            .increment(by: Int64(result.deliveries))
        counter("apns_server_log_pruned_total", "Finished log entries removed by retention", [("kind", "broadcast")])
            .increment(by: Int64(result.broadcasts))
    }

    private func counter(_ name: String, _ help: String, _ labels: [(String, String)]) -> Prometheus.Counter {
        // Names here end in _total already: the unit component stays empty.
        registry.makeCounter(descriptor: .init(metricName: name, unitName: "", helpText: help), labels: labels)
    }
}
