import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import ServiceCore

/// After the HTTP decoder: follows each request and its answer, so that
///
/// - an answer that goes out while its request is still arriving (a 401 or a 413
///   decided from the head alone) says `Connection: close`, and once written the
///   connection ends (`ConnectionGuard.closeAfterAnswer`) instead of reading, and
///   waiting for, a body nobody will use. Hummingbird would drain that body before
///   the next request, however slowly it came;
/// - a request the decoder cannot parse gets the API's error shape (a 400 with
///   `{"success":false,"error":…}`), then the connection closes;
/// - the connection guard learns where each request starts and ends, for its deadline.
final class EarlyAnswerHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let connection: ConnectionGuard
    /// A request's head came and its end not yet.
    private var reading = false
    /// Requests whose answer has not ended.
    private var unanswered = 0
    /// The answer being written said `Connection: close`.
    private var closing = false

    init(connection: ConnectionGuard) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            reading = true
            unanswered += 1
            connection.requestHeadArrived()
        case .body:
            break
        case .end:
            reading = false
            connection.requestComplete()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(var response) where reading:
            closing = true
            response.headerFields[.connection] = "close"
            context.write(wrapOutboundOut(.head(response)), promise: promise)
        case .end where closing:
            unanswered -= 1
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.assumeIsolated().whenComplete { [connection] _ in connection.closeAfterAnswer() }
            written.futureResult.cascade(to: promise)
            context.write(data, promise: written)
        case .end:
            unanswered -= 1
            context.write(data, promise: promise)
        default:
            context.write(data, promise: promise)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Between requests, nothing else is answering: the 400 is ours to write. In
        // the middle of one, the server's request handling sees the error instead.
        guard error is HTTPParserError, !reading, unanswered == 0, !closing else {
            context.fireErrorCaught(error)
            return
        }
        closing = true
        let body = JSON.object([("success", .bool(false)), ("error", .string("malformed HTTP request"))]).bytes
        let head = HTTPResponse(status: .badRequest, headerFields: [
            .contentType: "application/json; charset=utf-8", .contentLength: "\(body.count)", .connection: "close",
        ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(context.channel.allocator.buffer(bytes: body))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        written.futureResult.assumeIsolated().whenComplete { [connection] _ in connection.closeAfterAnswer() }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: written)
    }
}
