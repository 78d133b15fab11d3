import NIOCore

/// The first handler of every API connection, on its raw bytes (before the HTTP
/// decoder). It enforces what a client must not be able to stretch:
///
/// - its address's share of the server's connections (`ConnectionLimits`): over it,
///   the connection is closed before anything is read;
/// - an absolute deadline per request: from the request's first byte to its last
///   (head and body together), `requestTimeout`. An idle timer would not do: every
///   trickled byte would reset it.
/// - after an early answer (see `EarlyAnswerHandler`): the rest of the request is
///   read and dropped, never decoded, and the connection closes.
///
/// Between requests, an idle keep-alive connection is left to the server's idle timeout.
final class ConnectionGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// After an early answer, how long its unread request is dropped before the
    /// close. Closing with unread bytes makes the kernel send a reset, which can
    /// destroy the answer before the client reads it; a short linger lets the answer
    /// arrive (the client sees it, then the end of the stream) and bounds what a
    /// trickling client can hold.
    static let linger: TimeAmount = .seconds(2)

    private let limits: ConnectionLimits
    private let requestTimeout: TimeAmount
    private var context: ChannelHandlerContext?
    private var admitted = false
    /// Between a request's first byte and its end.
    private var inRequest = false
    private var deadline: Scheduled<Void>?
    /// Answered early or refused: whatever comes in is dropped.
    private var discarding = false

    init(limits: ConnectionLimits, requestTimeout: TimeAmount) {
        self.limits = limits
        self.requestTimeout = requestTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive {
            // Not within handlerAdded: the rest of the pipeline is still being set up.
            context.eventLoop.assumeIsolated().execute { self.admit(context) }
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context)
        context.fireChannelActive()
    }

    private func admit(_ context: ChannelHandlerContext) {
        guard !admitted else { return }
        admitted = true
        if !limits.admit(context.channel) {
            discarding = true
            context.close(promise: nil)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A body nobody will read is not decoded, nor handed to the server.
        if discarding { return }
        if !inRequest { startRequest() }
        context.fireChannelRead(data)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Lingering after an early answer, the client closed its side: nothing more to drop.
        if discarding, let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A request's head was decoded (a pipelined one may come without fresh bytes).
    func requestHeadArrived() {
        if !inRequest { startRequest() }
    }

    /// The request's last part was decoded: in time.
    func requestComplete() {
        inRequest = false
        deadline?.cancel()
        deadline = nil
    }

    private func startRequest() {
        guard let context else { return }
        inRequest = true
        deadline?.cancel()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: requestTimeout) {
            // Too slow, however steadily it trickles.
            self.discarding = true
            context.close(promise: nil)
        }
    }

    /// The answer went out before its request was read to the end: end our side now
    /// (the client reads the answer, then the end of the stream), drop what still
    /// comes, and close once the client closes or `linger` has passed.
    func closeAfterAnswer() {
        guard let context, !discarding else { return }
        discarding = true
        requestComplete()
        let promise = context.eventLoop.makePromise(of: Void.self)
        promise.futureResult.assumeIsolated().whenFailure { _ in context.close(promise: nil) }
        context.close(mode: .output, promise: promise)
        _ = context.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) {
            context.close(promise: nil)
        }
    }
}
