/// What the lane's state machine tells its lane to do. The machine only decides;
/// the lane carries these out, in the order given: most under its lock (they touch
/// a slot's request, which the next action may hand to someone else), the rest
/// after it (submits, resumes, the retry timer, logs).
///
/// `Caller` is a single send waiting for a slot, `Batch` a batch's inbox: the
/// machine holds them and hands them back, and never looks inside.
enum LaneAction<Caller, Batch: AnyObject> {
    /// Put a request into this slot, which the machine just gave out.
    case fill(slot: Int, LaneRequestSource<Caller>)
    /// Give the transport this provider token before the submits that follow.
    case authorize(jwt: String)
    /// Hand this slot's request to the transport. `resend`: the server did not
    /// process it, so it goes ahead of requests never sent.
    case submit(slot: Int, resend: Bool)
    /// The request in this slot is over: hand its owner this result, let go of the
    /// request. The slot may be filled again by a later action.
    case finish(slot: Int, LaneEnding)
    /// The request in this slot goes out again (after `delay`), or, with a nil
    /// `delay`, once more on a fresh connection: a metric, a debug log.
    case retrying(slot: Int, status: Int, reason: Reason?, error: String?, delay: Duration?)
    /// A caller that never got a slot ends with this error (shutdown, cancellation).
    case notSent(Caller, why: String)
    /// Wake this batch: a slot freed, or the lane closed.
    case poke(Batch)
    /// Nothing is in flight any more: wake whoever waits for the lane to drain.
    case drained
    /// Send the due retries at this time (`LaneStateMachine.timerFired`), kept as
    /// the machine keeps time (`LaneStateMachine.instant(_:)` makes it an instant):
    /// an `Instant`'s layout is the runtime's to know, and one in any case made every
    /// copy or move of any action a call through the enum's value witnesses.
    case armTimer(at: Duration)
    /// Something an operator must see.
    case logError(String)
}

/// Where a slot's request comes from.
enum LaneRequestSource<Caller> {
    /// The caller of the `enter` event that produced this action.
    case entrant
    /// A caller that waited in line and is handed this slot.
    case waiter(Caller)
    /// Item `index` of the requests of the `startBatch` event that produced it.
    case batchItem(index: Int)
}

/// A request's final result, less what the lane keeps (token, apns-id, owner).
struct LaneEnding: Equatable {
    var status: Int
    var reason: Reason?
    var timestamp: Int64?
    var uniqueID: String?
    var error: String?
    /// It ended because the endpoint cannot be reached.
    var unreachable = false
    /// How many times it was handed to the transport.
    var attempts = 0
    var latency: Duration = .zero
}

/// What the transport said about one submitted request: the machine's view of a
/// C completion.
enum LaneAnswer: Equatable {
    /// APNs answered. `reason` only when the status is not 200.
    case answered(status: Int, reason: Reason?, timestamp: Int64?, uniqueID: String?)
    /// The server did not act on it (GOAWAY, REFUSED_STREAM, a connection lost
    /// before it was sent): safe to repeat.
    case notProcessed(error: String?)
    /// No answer in time: it may or may not have been delivered.
    case timedOut(error: String?)
    /// No connection could be made for it.
    case connectFailed(error: String?)
    /// The transport stopped (it is being freed).
    case cancelled(error: String?)
}

/// Where the machine gets provider tokens; `ProviderToken` in the lane, a fake in tests.
protocol LaneTokenSource: Sendable {
    /// The token to use now.
    func currentToken() throws(SigningKey.LoadError) -> ProviderToken.Current
    /// After ExpiredProviderToken on a request sent with `generation`: a newer one.
    func expiredToken(generation: Int) throws(SigningKey.LoadError) -> ProviderToken.Current
}

extension ProviderToken: LaneTokenSource {
    func currentToken() throws(SigningKey.LoadError) -> Current { try current() }
    func expiredToken(generation: Int) throws(SigningKey.LoadError) -> Current { try expired(generation: generation) }
}
