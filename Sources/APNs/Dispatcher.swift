import Synchronization

/// A client's lanes, one per environment it sends to: the default one made with
/// the client (so a bad CA file fails there), the others on first use.
final class Dispatcher: Sendable {
    private let configuration: APNsClient.Configuration
    private let metrics: ClientMetrics
    private let state: Mutex<(lanes: [Environment: Lane], closed: Bool)>
    let defaultLane: Lane

    init(configuration: APNsClient.Configuration, metrics: ClientMetrics) throws(APNsError) {
        self.configuration = configuration
        self.metrics = metrics
        defaultLane = try Lane(environment: configuration.environment, configuration: configuration, metrics: metrics)
        state = Mutex(([configuration.environment: defaultLane], false))
    }

    /// The lane for `environment` (nil: the default), made on first use.
    func lane(for environment: Environment?) throws(APNsError) -> Lane {
        guard let environment, environment != configuration.environment else { return defaultLane }
        return try state.withLock { (s: inout (lanes: [Environment: Lane], closed: Bool)) throws(APNsError) -> Lane in
            guard !s.closed else { throw .shutDown }
            if let lane = s.lanes[environment] { return lane }
            let lane = try Lane(environment: environment, configuration: configuration, metrics: metrics)
            s.lanes[environment] = lane
            return lane
        }
    }

    var lanes: [Lane] { state.withLock { Array($0.lanes.values) } }

    /// Stops new sends everywhere, waits for every request in flight, then frees
    /// the C senders.
    func shutdown() async {
        let lanes = state.withLock { s in
            s.closed = true
            return Array(s.lanes.values)
        }
        for lane in lanes { lane.close() }
        for lane in lanes { await lane.drained() }
        for lane in lanes { lane.destroy() }
    }

    /// Stops new sends everywhere and frees the C senders now: requests in flight
    /// end unanswered (status 0), as cancelled, instead of being waited for.
    func abandon() {
        let lanes = state.withLock { s in
            s.closed = true
            return Array(s.lanes.values)
        }
        for lane in lanes { lane.close() }
        for lane in lanes { lane.destroy() }
    }
}
