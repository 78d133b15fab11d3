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
/// (`retry_hours`, `timeout_ms`, `concurrency`, `backoff_base_ms`, `backoff_max_ms`).
public struct WebhookConfig: Sendable {
    public struct Endpoint: Sendable {
        public var url: String
        /// The HMAC key (the file's bytes, a trailing newline dropped).
        var secret: [UInt8]
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

    var routes: WebhookRoutes {
        WebhookRoutes(endpoints.map { WebhookRoutes.Endpoint(url: $0.url, events: $0.events) })
    }

    func endpoint(_ url: String) -> Endpoint? { endpoints.first { $0.url == url } }
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
            try r.rejectUnknown()
        } else {
            throw ConfigError("config: webhooks must be a list of {url, secret_file, events}")
        }
        let known = WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")
        for (i, item) in list.enumerated() {
            guard let m = item.mapping else { throw ConfigError("config: \(context)[\(i)] must be a mapping (url, secret_file, events)") }
            var r = Reader(mapping: m, context: "\(context)[\(i)].", base: reader.base)
            let url = try r.string("url", required: true)!
            guard let parsed = URL(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""),
                  let host = parsed.host, !host.isEmpty else {
                throw ConfigError("config: \(r.context)url must be an http:// or https:// URL, not '\(url)'")
            }
            guard !config.endpoints.contains(where: { $0.url == url }) else {
                throw ConfigError("config: \(r.context)url \(url) appears twice in webhooks")
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
            config.endpoints.append(.init(url: url, secret: secret, secretPath: secretPath, events: events))
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
