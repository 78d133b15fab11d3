import Prometheus
import ServiceCore
import Store

/// What the application is given rather than makes: its clock, and (for a test)
/// a store of its own. A deployed server takes the defaults.
public struct Dependencies: Sendable {
    /// Where every "now" of the service comes from.
    public var clock: any ServiceClock
    /// nil: the store the configuration names, opened (and closed) by the application.
    /// A store handed in stays its owner's to close.
    public var store: (any DeliveryStore)?
    /// What `GET /metrics` shows; the executable points swift-metrics at it too.
    public var metrics: PrometheusCollectorRegistry

    public init(clock: any ServiceClock = SystemClock(), store: (any DeliveryStore)? = nil,
                metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.clock = clock
        self.store = store
        self.metrics = metrics
    }
}
