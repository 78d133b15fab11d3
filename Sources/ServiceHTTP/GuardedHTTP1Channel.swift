import HummingbirdCore
import Logging
import NIOCore

/// Hummingbird's HTTP/1.1 connection with the API's guards around it: the
/// `ConnectionGuard` first, on the raw bytes (per-address cap, request deadline,
/// dropping what an early answer left unread), and the `EarlyAnswerHandler` after
/// the HTTP decoder. Request handling itself is Hummingbird's.
package struct GuardedHTTP1Channel: ServerChildChannel {
    package typealias Value = HTTP1Channel.Value

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits
    let requestTimeout: TimeAmount
    let idleTimeout: TimeAmount

    /// Use in `Application(server:)`.
    package static func builder(limits: ConnectionLimits, requestTimeout: TimeAmount, idleTimeout: TimeAmount) -> HTTPServerBuilder {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, limits: limits, requestTimeout: requestTimeout, idleTimeout: idleTimeout)
        }
    }

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let connectionGuard = ConnectionGuard(limits: limits, requestTimeout: requestTimeout)
        do {
            try channel.pipeline.syncOperations.addHandler(connectionGuard, position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let http = HTTP1Channel(responder: responder, configuration: .init(idleTimeout: idleTimeout))
        // Right after the decoded parts (as Hummingbird's additional handlers go), and
        // made here: each connection's answer handler reports to its own guard.
        return http.setup(channel: channel, logger: logger).assumeIsolated().flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            let state = try pipeline.handler(type: HTTPConnectionStateHandler.self)
            try pipeline.addHandler(EarlyAnswerHandler(connection: connectionGuard), position: .before(state))
            return value
        }.nonisolated()
    }

    package func handle(value: Value, logger: Logger) async {
        await HTTP1Channel(responder: responder).handle(value: value, logger: logger)
    }
}
