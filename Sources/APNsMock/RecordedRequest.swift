import CAPNsMock

/// One request as the mock received it (when recording is on).
public struct RecordedRequest: Sendable {
    /// 1, 2, ... in the order the mock accepted connections.
    public let connectionID: UInt64
    /// The HTTP/2 stream the request came on.
    public let streamID: Int32
    /// `:method`.
    public let method: String
    /// `:path`, e.g. `/3/device/<token>`.
    public let path: String

    /// Every header but the pseudo-headers, in arrival order.
    public let headers: [(String, String)]
    /// The body, up to 5121 bytes (one past the largest payload APNs takes).
    public let body: [UInt8]
    /// When the request was complete, on the mock's monotonic clock (CLOCK_MONOTONIC):
    /// only differences between records mean anything.
    public let received: Duration
    /// The answer the mock decided on; 0 when it gives none (stall). A reset connection
    /// (`MockServer.resetConnections()`) may have lost it on the way.
    public let status: Int
    /// Its APNs reason, nil for none.
    public let reason: String?

    /// The first value of a header, by lower-case name.
    public func header(_ name: String) -> String? {
        headers.first { $0.0 == name }?.1
    }

    /// The device token from a `/3/device/<token>` path.
    public var token: String? {
        path.hasPrefix("/3/device/") ? String(path.dropFirst("/3/device/".count)) : nil
    }

    init(_ r: capns_mock_record) {
        connectionID = r.connection_id
        streamID = r.stream_id
        method = String(cString: r.method)
        path = String(cString: r.path)
        headers = (0..<r.n_headers).map { i in
            (String(cString: r.headers[i].name), String(cString: r.headers[i].value))
        }
        body = r.body_len > 0 ? Array(UnsafeBufferPointer(start: r.body, count: r.body_len)) : []
        received = .nanoseconds(r.received_ns)
        status = Int(r.status)
        let why = r.reason.map { String(cString: $0) } ?? ""
        reason = why.isEmpty ? nil : why
    }
}
