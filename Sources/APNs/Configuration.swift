import Logging
import Metrics

/// Where APNs is.
public enum Environment: Sendable, Hashable, CustomStringConvertible {
    /// api.push.apple.com:443
    case production
    /// api.sandbox.push.apple.com:443 (apps signed for development)
    case sandbox
    /// Any other host and port: a mock, or APNs' alternative port 2197.
    case custom(host: String, port: Int)

    /// The host name requests connect to.
    public var host: String {
        switch self {
        case .production: "api.push.apple.com"
        case .sandbox: "api.sandbox.push.apple.com"
        case .custom(let host, _): host
        }
    }

    /// The port requests connect to: 443 for Apple's hosts.
    public var port: Int {
        if case .custom(_, let port) = self { return port }
        return 443
    }

    /// `host:port`.
    public var description: String { "\(host):\(port)" }
}

/// A host and port to connect to.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host name or an IP address; TLS verifies the server's certificate against it.
    public var host: String
    /// The TCP port.
    public var port: Int

    /// An endpoint at `host` and `port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`.
    public var description: String { "\(host):\(port)" }
}

/// Which HTTP/2 engine carries the requests.
public enum Transport: String, Sendable, CaseIterable {
    /// libcurl's multi interface with nghttp2: kept for comparison (BENCHMARKS.md).
    /// libcurl 7.88 resets every finished stream, which servers guarding against
    /// rapid resets answer by dropping the connection now and then.
    case curl
    /// An nghttp2 session over OpenSSL driven directly, as h2load does: many
    /// requests per write, no per-request system call. The default.
    case nghttp2
}

extension APNsClient {
    /// How an `APNsClient` connects, proves who it is, and retries. Every setting but
    /// `credentials` and `environment` has a default that suits APNs.
    public struct Configuration: Sendable {
        /// The provider key or the client certificate every connection uses.
        public var credentials: Credentials
        /// Where a send that names no environment goes.
        public var environment: Environment
        /// Where `.sandbox` sends connect instead of api.sandbox.push.apple.com:443 (a mock).
        public var sandboxEndpoint: Endpoint?
        /// Where `.production` sends connect instead of api.push.apple.com:443 (a mock, or port 2197).
        public var productionEndpoint: Endpoint?
        /// A CA (PEM) to trust on top of the system's, e.g. a mock's. Verification is always on.
        public var caFile: String?
        /// The HTTP/2 engine; `.nghttp2` unless comparing.
        public var transport: Transport
        /// HTTP/2 connections to the environment (one is what APNs recommends).
        public var connections: Int
        /// Streams in flight at once per connection; the server's SETTINGS_MAX_CONCURRENT_STREAMS
        /// can lower it. The client holds one more such window of requests queued, so that a
        /// stream that frees is refilled at once; memory is bounded by that.
        public var maxInFlight: Int
        /// How long a connection (TCP, the proxy's tunnel, TLS) may take to open.
        public var connectTimeout: Duration
        /// Deadline of one attempt; nothing waits longer for an answer.
        public var requestTimeout: Duration
        /// PING a connection this long idle, so a half-dead one is found before it is used.
        public var pingInterval: Duration
        /// How transient failures are sent again.
        public var retry: RetryPolicy
        /// Where the client logs: each retry at debug level, and errors that hold up
        /// every request (an unreachable server, a refused provider key).

        public var logger: Logger
        /// An HTTP proxy every connection goes through by CONNECT (TLS to APNs end to end
        /// inside it), except to endpoints its bypass list names; nil connects directly.
        /// The environment is not read: see `Proxy.fromEnvironment`.
        public var proxy: Proxy? = nil

        /// A configuration with the given settings; `proxy` is set on the value afterwards.
        public init(credentials: Credentials, environment: Environment, caFile: String? = nil,

                    transport: Transport = .nghttp2, connections: Int = 1, maxInFlight: Int = 1000,
                    connectTimeout: Duration = .seconds(10), requestTimeout: Duration = .seconds(30),
                    pingInterval: Duration = .seconds(30), retry: RetryPolicy = .default,
                    logger: Logger = Logger(label: "apns"),
                    sandboxEndpoint: Endpoint? = nil, productionEndpoint: Endpoint? = nil) {
            self.credentials = credentials
            self.environment = environment
            self.caFile = caFile
            self.transport = transport
            self.connections = connections
            self.maxInFlight = maxInFlight
            self.connectTimeout = connectTimeout
            self.requestTimeout = requestTimeout
            self.pingInterval = pingInterval
            self.retry = retry
            self.logger = logger
            self.sandboxEndpoint = sandboxEndpoint
            self.productionEndpoint = productionEndpoint
        }

        /// Where requests for `environment` connect.
        func endpoint(for environment: Environment) -> Endpoint {
            switch environment {
            case .sandbox: sandboxEndpoint ?? Endpoint(host: environment.host, port: environment.port)
            case .production: productionEndpoint ?? Endpoint(host: environment.host, port: environment.port)
            case .custom(let host, let port): Endpoint(host: host, port: port)
            }
        }
    }
}

/// The counters and timers the client reports through swift-metrics.
struct ClientMetrics: Sendable {
    let sent = Counter(label: "apns_requests_sent_total")
    let delivered = Counter(label: "apns_notifications_delivered_total")
    let retries = Counter(label: "apns_retries_total")
    let latency = Timer(label: "apns_delivery_latency")
    /// False when the timer records nowhere (no metrics backend when it was made,
    /// so it never will): a result's nanoseconds, a 128-bit division, are not worked out.
    let timesLatency = !(MetricsSystem.factory is NOOPMetricsHandler)

    func failed(_ reason: String) -> Counter {
        Counter(label: "apns_notifications_failed_total", dimensions: [("reason", reason)])
    }

    func record(_ result: DeliveryResult) {
        if result.isDelivered {
            delivered.increment()
        } else {
            failed(result.reason?.rawValue ?? (result.status == 0 ? "NoAnswer" : "\(result.status)")).increment()
        }
        if result.attempts > 0 && timesLatency { latency.recordNanoseconds(result.latency.clampedNanoseconds) }
    }
}

extension Duration {
    /// Whole nanoseconds, Int64.max when they do not fit: what swift-metrics'
    /// `record(duration:)` records, with one read of `components` (a 128-bit
    /// division) instead of two.
    var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        let (total, over) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return over ? .max : total
    }
}

extension APNsClient.Configuration {
    /// Requests submitted and not yet answered, at most: every connection's streams
    /// plus one window queued behind them.
    var outstandingLimit: Int { max(1, maxInFlight) * (max(1, connections) + 1) }
}

extension Duration {
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
