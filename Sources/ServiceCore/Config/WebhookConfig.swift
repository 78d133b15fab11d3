import Foundation
import Store
import Yams

/// `webhooks`: the receivers of signed events, and how the worker sends to them.
///
/// Either a list of receivers:
///
///     webhooks:
///       - url: https://api.example.com/hooks/apns
///         secret_file: webhook.secret
///         events: [token.deactivated, delivery.failed, notification.completed, broadcast.completed]
///
/// or a mapping with the list as `endpoints` beside the worker's settings
/// (`retry_hours`, `timeout_ms`, `concurrency`, `backoff_base_ms`, `backoff_max_ms`,
/// `allow_private_networks`).
///
/// A URL with a user or password (`https://user:pass@host/`) is refused at start:
/// receivers check the signature header, and the client would have dropped the
/// credentials silently. A query (`?token=…`) is sent as written, but logs and
/// `GET /v1/webhook-events` show only scheme, host, port and path. Where a URL
/// may point: `WebhookDestination`.
public struct WebhookConfig: Sendable {
    public struct Endpoint: Sendable {
        public var url: String
        /// The URL without what may be a secret (`WebhookDestination.redacted`).
        public var shown: String
        package var host: String
        /// The HMAC key (the file's bytes, a trailing newline dropped).
        package var secret: [UInt8]
        var secretPath: String
        public var events: Set<WebhookEventType>
    }

    public var endpoints: [Endpoint] = []
    /// How long an event is tried before it is `failed` (listed by `GET /v1/webhook-events?state=failed`).
    public var retryHours = 24
    /// One attempt's limit, connect to the end of the answer.
    public var timeoutMillis = 10_000
    /// Events in flight at once, over all receivers.
    public var concurrency = 8
    /// Backoff before attempt n+1: base × 2^(n-1), capped.
    public var backoffBaseMillis = 5_000
    public var backoffMaxMillis = 3_600_000
    /// How often the worker looks for due events and completed notifications.
    public var pollIntervalMillis = 500
    /// Whether a receiver may be in a private range (10/8, 172.16/12, 192.168/16,
    /// 100.64/10, fc00::/7); link-local and metadata addresses never may.
    public var allowPrivateNetworks = false
    /// Plain http to another machine.
    var warnings: [String] = []

    package var routes: WebhookRoutes {
        WebhookRoutes(endpoints.map { WebhookRoutes.Endpoint(url: $0.url, events: $0.events) })
    }

    package func endpoint(_ url: String) -> Endpoint? { endpoints.first { $0.url == url } }
}

extension ServerConfig {
    static func parseWebhooks(_ reader: inout Reader) throws(ConfigError) -> WebhookConfig {
        var config = WebhookConfig()
        guard let node = reader.take("webhooks"), node.null == nil else { return config }
        var list: [Node]
        var context = "webhooks"
        if let sequence = node.sequence {
            list = Array(sequence)
        } else if let mapping = node.mapping {
            var r = Reader(mapping: mapping, context: "webhooks.", base: reader.base)
            guard let endpoints = r.take("endpoints")?.sequence else {
                throw ConfigError("config: webhooks.endpoints is required (a list of {url, secret_file, events})")
            }
            list = Array(endpoints)
            context = "webhooks.endpoints"
            config.retryHours = try r.int("retry_hours", default: config.retryHours, range: 0...8760)
            config.timeoutMillis = try r.int("timeout_ms", default: config.timeoutMillis, range: 100...300_000)
            config.concurrency = try r.int("concurrency", default: config.concurrency, range: 1...256)
            config.backoffBaseMillis = try r.int("backoff_base_ms", default: config.backoffBaseMillis, range: 10...86_400_000)
            config.backoffMaxMillis = try r.int("backoff_max_ms", default: config.backoffMaxMillis, range: 10...86_400_000)
            config.pollIntervalMillis = try r.int("poll_interval_ms", default: config.pollIntervalMillis, range: 10...60_000)
            config.allowPrivateNetworks = try r.bool("allow_private_networks", default: false)
            try r.rejectUnknown()
        } else {
            throw ConfigError("config: webhooks must be a list of {url, secret_file, events}")
        }
        let known = WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")
        for (i, item) in list.enumerated() {
            guard let m = item.mapping else { throw ConfigError("config: \(context)[\(i)] must be a mapping (url, secret_file, events)") }
            var r = Reader(mapping: m, context: "\(context)[\(i)].", base: reader.base)
            let url = try r.string("url", required: true)!
            let shown = WebhookDestination.redacted(url)
            guard let parsed = URLComponents(string: url), let scheme = parsed.scheme?.lowercased(),
                  ["http", "https"].contains(scheme), let host = parsed.host, !host.isEmpty else {
                throw ConfigError("config: \(r.context)url must be an http:// or https:// URL, not '\(shown)'")
            }
            guard parsed.user == nil && parsed.password == nil else {
                throw ConfigError("config: \(r.context)url \(shown) has a user or password (user:pass@), which is not sent; "
                                  + "receivers check the \(WebhookSignature.header) header instead")
            }
            guard !config.endpoints.contains(where: { $0.url == url }) else {
                throw ConfigError("config: \(r.context)url \(shown) appears twice in webhooks")
            }
            // An address is judged now; a name when the worker resolves it, before
            // each attempt (resolving here would make a start wait on DNS).
            if let address = WebhookDestination.literal(host),
               let why = WebhookDestination.refusal(host: address, addresses: [address],
                                                    allowPrivate: config.allowPrivateNetworks) {
                throw ConfigError("config: \(r.context)url \(shown): \(why)")
            }
            if scheme == "http" && !WebhookDestination.isLoopback(host) {
                config.warnings.append("webhooks: \(shown) is plain http to another machine: events (device tokens, "
                                       + "user ids) and their signatures cross the network in clear; use https")
            }
            let secretPath = resolve(try r.string("secret_file", required: true)!, against: reader.base)
            let secret = try readWebhookSecret(secretPath, field: "\(r.context)secret_file")
            guard let names = r.take("events")?.sequence, !names.isEmpty else {
                throw ConfigError("config: \(r.context)events must be a non-empty list of event names (\(known))")
            }
            var events = Set<WebhookEventType>()
            for name in names {
                guard let text = name.scalar?.string, let type = WebhookEventType(rawValue: text) else {
                    throw ConfigError("config: \(r.context)events: unknown event '\(name.scalar?.string ?? "?")' (known: \(known))")
                }
                events.insert(type)
            }
            try r.rejectUnknown()
            config.endpoints.append(.init(url: url, shown: shown, host: host, secret: secret, secretPath: secretPath,
                                          events: events))
        }
        return config
    }

    /// A webhook's signing secret: the file's bytes (a trailing newline dropped), 16 or more.
    static func readWebhookSecret(_ path: String, field: String) throws(ConfigError) -> [UInt8] {
        var bytes: [UInt8]
        switch contents(of: path) {
        case .success(let read): bytes = read
        case .failure(let why): throw ConfigError("config: \(field): cannot read \(path): \(why.message)")
        }
        while let last = bytes.last, last == 0x0A || last == 0x0D { bytes.removeLast() }
        guard bytes.count >= 16 else {
            throw ConfigError("config: \(field): the secret in \(path) is shorter than 16 bytes")
        }
        return bytes
    }
}
