import Testing
import TestSupport
@testable import APNs

/// The lane's decisions, driven event by event without a socket, a thread or a
/// clock: each test feeds `LaneStateMachine` events and reads the actions it asks
/// its lane to carry out. Actions are written out as short lines ("submit 0",
/// "finish 1 403 UnrelatedKeyIdInToken") so that a test reads as the lane's log.
@Suite struct LaneStateMachineTests {
    /// A batch's inbox, as the machine sees it: something to wake.
    final class Inbox {
        let name: String
        init(_ name: String) { self.name = name }
    }

    /// Provider tokens whose generations the test controls.
    final class Tokens: LaneTokenSource, @unchecked Sendable {   // one test's thread only
        var generation = 1
        var failure: String?
        var expiredAsked: [Int] = []

        func currentToken() throws(SigningKey.LoadError) -> ProviderToken.Current {
            if let failure { throw SigningKey.LoadError(description: failure) }
            return ProviderToken.Current(jwt: "jwt\(generation)", generation: generation, issuedAt: 0)
        }

        func expiredToken(generation: Int) throws(SigningKey.LoadError) -> ProviderToken.Current {
            expiredAsked.append(generation)
            if let failure { throw SigningKey.LoadError(description: failure) }
            if generation == self.generation { self.generation += 1 }
            return try currentToken()
        }
    }

    typealias Machine = LaneStateMachine<String, Inbox>

    let t0 = ContinuousClock.now
    let tokens = Tokens()

    func machine(capacity: Int = 4, maxAttempts: Int = 3) -> Machine {
        Machine(capacity: capacity,
                retryPolicy: RetryPolicy(maxAttempts: maxAttempts, initialBackoff: .milliseconds(200),
                                         maxBackoff: .seconds(30), jitter: 0.5),
                tokens: tokens, keyName: "provider key K (team T)", place: "the production environment",
                cannotConnect: "cannot connect to api.push.apple.com:443")
    }

    /// The actions decided since the last call, as lines, and the list emptied, as
    /// the lane does after carrying them out.
    func take(_ m: inout Machine) -> [String] {
        defer { m.actions.removeAll() }
        return m.actions.map { action in
            switch action {
            case .fill(let slot, .entrant): "fill \(slot) entrant"
            case .fill(let slot, .waiter(let caller)): "fill \(slot) \(caller)"
            case .fill(let slot, .batchItem(let i)): "fill \(slot) item \(i)"
            case .authorize(let jwt): "authorize \(jwt)"
            case .submit(let slot, let resend): resend ? "resend \(slot)" : "submit \(slot)"
            case .finish(let slot, let e):
                ["finish \(slot) \(e.status)", e.reason?.rawValue, e.error.map { "(\($0))" },
                 e.unreachable ? "unreachable" : nil].compactMap { $0 }.joined(separator: " ")
            case .retrying(let slot, _, _, _, let delay):
                delay.map { $0 == .zero ? "retry \(slot) now" : "retry \(slot) later" } ?? "retry \(slot) fresh"
            case .notSent(let caller, let why): "not sent \(caller) (\(why))"
            case .poke(let inbox): "poke \(inbox.name)"
            case .drained: "drained"
            case .armTimer: "timer"
            case .logError: "log error"
            }
        }
    }

    /// The one `.finish` among the actions, for a closer look at its result.
    func ending(_ m: Machine) -> LaneEnding? {
        for action in m.actions {
            if case .finish(_, let e) = action { return e }
        }
        return nil
    }

    func answer(_ status: Int, _ reason: Reason? = nil) -> LaneAnswer {
        .answered(status: status, reason: reason, timestamp: nil, uniqueID: nil)
    }

    /// Fills the machine with single callers named c0, c1, ..., each in slot order.
    func enter(_ m: inout Machine, _ names: [String], at now: ContinuousClock.Instant? = nil) {
        for (k, name) in names.enumerated() {
            m.enter(caller: k + 1, name, taskCancelled: false, now: now ?? t0)
        }
    }

    /// The machine's bookkeeping adds up: every slot is either free or busy, and a
    /// caller waits only while no slot is free.
    func expectConsistent(_ m: Machine, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(m.busy + m.free.count == m.capacity, sourceLocation: sourceLocation)
        #expect(m.callers.isEmpty || m.free.isEmpty, sourceLocation: sourceLocation)
        #expect(Set(m.free).count == m.free.count, sourceLocation: sourceLocation)
    }

    // MARK: - Slots, the line, and the in-flight bound

    @Test func aSendWithAFreeSlotIsFilledAuthorizedOnceAndSubmitted() {
        var m = machine()
        m.enter(caller: 1, "a", taskCancelled: false, now: t0)
        #expect(take(&m) == ["fill 0 entrant", "authorize jwt1", "submit 0"])
        m.enter(caller: 2, "b", taskCancelled: false, now: t0)
        #expect(take(&m) == ["fill 1 entrant", "submit 1"])
        #expect(m.busy == 2 && m.slots[0].attempts == 1 && m.firstSent(0) == t0)
        expectConsistent(m)
    }

    @Test func aFullLaneHoldsCallersInLineAndHandsAFreedSlotToTheFirst() {
        var m = machine(capacity: 2)
        enter(&m, ["a", "b", "c", "d"])
        _ = take(&m)
        #expect(m.busy == 2 && m.callers.count == 2)
        expectConsistent(m)

        m.complete([(slot: 0, answer: answer(200))], now: t0 + .milliseconds(5))
        #expect(take(&m) == ["finish 0 200", "fill 0 c", "submit 0"])
        #expect(m.busy == 2 && m.callers.count == 1)
        expectConsistent(m)
    }

    @Test func aBatchStartsWhatFitsAndAFreedSlotGoesToACallerBeforeIt() {
        var m = machine(capacity: 2)
        let inbox = Inbox("b1")
        #expect(m.startBatch(count: 3, inbox, now: t0) == .started(2))
        #expect(take(&m) == ["fill 0 item 0", "fill 1 item 1", "authorize jwt1", "submit 0", "submit 1"])
        m.enter(caller: 7, "c", taskCancelled: false, now: t0)
        #expect(take(&m).isEmpty)

        // The caller gets the slot; waking the batch for it would be in vain.
        m.complete([(slot: 1, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 1 200", "fill 1 c", "submit 1"])
        expectConsistent(m)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "poke b1"])
        #expect(m.startBatch(count: 1, inbox, now: t0) == .started(1))
        #expect(take(&m) == ["fill 0 item 0", "submit 0"])
        expectConsistent(m)
    }

    /// Batches that did not fit wait in line, each once; a freed slot wakes the first
    /// (not all of them: each would rebuild its run to start one request, or none),
    /// and one that still has more after it ran goes to the back.
    @Test func aFreedSlotWakesOneWaitingBatchInTurn() {
        var m = machine(capacity: 2)
        let (b1, b2, b3) = (Inbox("b1"), Inbox("b2"), Inbox("b3"))
        #expect(m.startBatch(count: 5, b1, now: t0) == .started(2))
        #expect(m.startBatch(count: 5, b2, now: t0) == .started(0))
        #expect(m.startBatch(count: 5, b3, now: t0) == .started(0))
        #expect(m.startBatch(count: 5, b2, now: t0) == .started(0))   // woken by something else: keeps its place
        #expect(m.batches.count == 3)
        _ = take(&m)

        m.complete([(slot: 1, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 1 200", "poke b1"])
        expectConsistent(m)
        #expect(m.startBatch(count: 3, b1, now: t0) == .started(1))   // more left: to the back
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "poke b2"])
        m.complete([(slot: 1, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 1 200", "poke b3", "poke b1", "drained"])
        #expect(m.batches.isEmpty)
    }

    /// A batch in line that started everything it had (its own answers woke it) leaves
    /// the line: a freed slot wakes the next one, not it.
    @Test func aBatchThatStartedEverythingLeavesTheLine() {
        var m = machine(capacity: 2)
        let (b1, b2) = (Inbox("b1"), Inbox("b2"))
        #expect(m.startBatch(count: 3, b1, now: t0) == .started(2))
        #expect(m.startBatch(count: 2, b2, now: t0) == .started(0))
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "poke b1"])
        // b2, still in line, runs first (its own answers woke it) and starts all it has.
        #expect(m.startBatch(count: 1, b2, now: t0) == .started(1))
        #expect(m.batches.isEmpty)
        #expect(m.startBatch(count: 1, b1, now: t0) == .started(0))   // b1 came too late: in line again
        _ = take(&m)
        m.complete([(slot: 1, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 1 200", "poke b1"])
    }

    /// A batch woken for a slot may not come back for it (it stopped meanwhile): once
    /// nothing is in flight, no later slot would wake the others, so all are woken.
    @Test func whenNothingIsInFlightEveryWaitingBatchIsWoken() {
        var m = machine(capacity: 1)
        let (b1, b2, b3) = (Inbox("b1"), Inbox("b2"), Inbox("b3"))
        m.enter(caller: 1, "a", taskCancelled: false, now: t0)
        for b in [b1, b2, b3] { #expect(m.startBatch(count: 2, b, now: t0) == .started(0)) }
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "poke b1", "poke b2", "poke b3", "drained"])
    }

    /// A cancelled batch leaves the line: no freed slot wakes it in vain.
    @Test func aCancelledBatchLeavesTheLine() {
        var m = machine(capacity: 2)
        let (b1, b2) = (Inbox("b1"), Inbox("b2"))
        #expect(m.startBatch(count: 2, b1, now: t0) == .started(2))
        #expect(m.startBatch(count: 2, b2, now: t0) == .started(0))
        _ = take(&m)
        m.cancel(batch: b2, now: t0)
        #expect(m.batches.isEmpty)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200"])
    }

    @Test func theLastRequestToEndDrainsTheLane() {
        var m = machine()
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200"])
        #expect(!m.isDrained)
        m.complete([(slot: 1, answer: answer(410, .unregistered))], now: t0)
        #expect(take(&m) == ["finish 1 410 Unregistered", "drained"])
        #expect(m.isDrained)
    }

    @Test func aResultCarriesItsAttemptsAndTheTimeSinceItWasFirstSent() {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: .answered(status: 200, reason: nil, timestamp: nil, uniqueID: "u-1"))],
                   now: t0 + .milliseconds(40))
        #expect(ending(m) == LaneEnding(status: 200, uniqueID: "u-1", attempts: 1, latency: .milliseconds(40)))
    }

    // MARK: - Answers: what ends a request, what sends it again

    /// One answer to a request sent once, and what the machine does with it.
    @Test(arguments: [
        (answer: LaneAnswer.answered(status: 200, reason: nil, timestamp: nil, uniqueID: nil), then: ["finish 0 200", "drained"]),
        (.answered(status: 400, reason: .badDeviceToken, timestamp: nil, uniqueID: nil), ["finish 0 400 BadDeviceToken", "drained"]),
        (.answered(status: 410, reason: .unregistered, timestamp: 5, uniqueID: nil), ["finish 0 410 Unregistered", "drained"]),
        (.answered(status: 429, reason: .tooManyRequests, timestamp: nil, uniqueID: nil), ["retry 0 later", "timer"]),
        (.answered(status: 500, reason: .internalServerError, timestamp: nil, uniqueID: nil), ["retry 0 later", "timer"]),
        (.answered(status: 503, reason: .serviceUnavailable, timestamp: nil, uniqueID: nil), ["retry 0 later", "timer"]),
        (.answered(status: 403, reason: .unrelatedKeyIdInToken, timestamp: nil, uniqueID: nil),
         ["retry 0 fresh", "submit 0"]),
        (.answered(status: 403, reason: .expiredProviderToken, timestamp: nil, uniqueID: nil),
         ["retry 0 now", "authorize jwt2", "submit 0"]),
        (.notProcessed(error: "GOAWAY"), ["retry 0 now", "resend 0"]),
        (.timedOut(error: "deadline"), ["retry 0 later", "timer"]),
        (.connectFailed(error: "refused"), ["retry 0 later", "timer"]),
        (.cancelled(error: nil), ["finish 0 0 (cancelled)", "drained"]),
    ])
    func oneAnswer(answer: LaneAnswer, then expected: [String]) {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer)], now: t0)
        #expect(take(&m) == expected)
        expectConsistent(m)
    }

    @Test func aFinalAnswerKeepsItsTimestampAndUniqueID() {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: .answered(status: 410, reason: .unregistered, timestamp: 1_700, uniqueID: "u"))],
                   now: t0)
        #expect(ending(m) == LaneEnding(status: 410, reason: .unregistered, timestamp: 1_700, uniqueID: "u",
                                        attempts: 1))
    }

    /// GOAWAY, REFUSED_STREAM: the server did not process it. Sent again at once,
    /// ahead of requests sent again for other reasons in the same batch of answers.
    @Test func requestsNotProcessedGoOutAgainAheadOfTheOthers() {
        var m = machine()
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.complete([(slot: 1, answer: answer(403, .unrelatedKeyIdInToken)),
                    (slot: 0, answer: .notProcessed(error: "GOAWAY"))], now: t0)
        #expect(take(&m) == ["retry 1 fresh", "retry 0 now", "resend 0", "submit 1"])
        #expect(m.slots[0].attempts == 2 && m.slots[0].refusals == 1)
    }

    /// Unprocessed attempts say nothing about the request: they do not use up its
    /// attempts, only a budget of their own, after which it ends.
    @Test func unprocessedAttemptsHaveABudgetOfTheirOwn() {
        var m = machine(maxAttempts: 2)
        enter(&m, ["a"])
        _ = take(&m)
        for _ in 0..<Machine.maxRefusals {
            m.complete([(slot: 0, answer: .notProcessed(error: "GOAWAY"))], now: t0)
            #expect(take(&m) == ["retry 0 now", "resend 0"])
        }
        m.complete([(slot: 0, answer: .notProcessed(error: "GOAWAY"))], now: t0)
        #expect(ending(m)?.attempts == Machine.maxRefusals + 1)
        #expect(take(&m) == ["finish 0 0 (GOAWAY)", "drained"])
    }

    @Test func unrelatedKeyIdInTokenIsResentOnceOnAFreshConnection() {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(403, .unrelatedKeyIdInToken))], now: t0)
        #expect(take(&m) == ["retry 0 fresh", "submit 0"])
        m.complete([(slot: 0, answer: answer(403, .unrelatedKeyIdInToken))], now: t0)
        #expect(take(&m) == ["finish 0 403 UnrelatedKeyIdInToken", "drained"])
    }

    @Test func aTransientAnswerIsRetriedAfterABackoffUntilItsAttemptsAreUsedUp() {
        var m = machine(maxAttempts: 2)
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(503, .serviceUnavailable))], now: t0)
        guard case .armTimer(let at)? = m.actions.last else {
            Issue.record("no timer armed")
            return
        }
        let due = m.instant(at)
        _ = take(&m)
        // Jittered: between half the initial backoff and all of it.
        #expect(due >= t0 + .milliseconds(100) && due <= t0 + .milliseconds(200))
        #expect(m.retries.count == 1 && m.timerDue == due)

        m.timerFired(now: due - .milliseconds(1))   // early: nothing is due yet
        #expect(take(&m) == ["timer"])
        m.timerFired(now: due)
        #expect(take(&m) == ["submit 0"])
        #expect(m.retries.isEmpty && m.timerDue == nil)

        m.complete([(slot: 0, answer: answer(503, .serviceUnavailable))], now: due)
        #expect(take(&m) == ["finish 0 503 ServiceUnavailable", "drained"])
    }

    /// One timer at a time: a later retry does not arm another; an earlier one does.
    @Test func theTimerIsArmedForTheEarliestRetryOnly() {
        var m = machine(maxAttempts: 5)
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(429, .tooManyRequests))], now: t0)
        #expect(take(&m) == ["retry 0 later", "timer"])
        m.complete([(slot: 1, answer: answer(429, .tooManyRequests))], now: t0 + .seconds(1))
        #expect(take(&m) == ["retry 1 later"])
        #expect(m.retries.count == 2)
    }

    @Test func aDeadlinePassedIsRetriedThenEndsWithTheTransportsError() {
        var m = machine(maxAttempts: 2)
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: .timedOut(error: "no answer in 10s"))], now: t0)
        _ = take(&m)
        m.timerFired(now: t0 + .seconds(1))
        #expect(take(&m) == ["submit 0"])
        m.complete([(slot: 0, answer: .timedOut(error: "no answer in 10s"))], now: t0 + .seconds(2))
        #expect(take(&m) == ["finish 0 0 (no answer in 10s)", "drained"])
    }

    // MARK: - Connections lost or refused

    /// A request that used up its attempts without a connection marks the endpoint
    /// unreachable: the next connection failure ends at once, and any answer clears it.
    @Test func anUnreachableEndpointEndsFurtherFailuresAtOnceUntilAnAnswer() {
        var m = machine(maxAttempts: 1)
        enter(&m, ["a", "b", "c"])
        _ = take(&m)
        m.complete([(slot: 0, answer: .connectFailed(error: nil))], now: t0)
        #expect(take(&m) == ["log error", "finish 0 0 (cannot connect to api.push.apple.com:443) unreachable"])
        #expect(m.unreachable != nil)
        m.complete([(slot: 1, answer: .connectFailed(error: "refused"))], now: t0)
        #expect(take(&m) == ["finish 1 0 (cannot connect to api.push.apple.com:443) unreachable"])

        m.complete([(slot: 2, answer: answer(200))], now: t0)
        #expect(m.unreachable == nil)
    }

    @Test func aConnectionFailureIsRetriedWhileAttemptsRemain() {
        var m = machine(maxAttempts: 2)
        enter(&m, ["a"])
        _ = take(&m)
        m.complete([(slot: 0, answer: .connectFailed(error: "refused"))], now: t0)
        #expect(take(&m) == ["retry 0 later", "timer"])
        #expect(m.unreachable == nil)
    }

    // MARK: - Provider keys and tokens

    /// BadEnvironmentKeyIdInToken: every request of that key ends at once, those
    /// waiting for a retry and those that come later, for the hold; then one tries again.
    @Test func aKeyForTheOtherEnvironmentEndsEveryWaitingSendAtOnce() {
        var m = machine(capacity: 3, maxAttempts: 5)
        enter(&m, ["a", "b", "c"])
        _ = take(&m)
        m.complete([(slot: 1, answer: answer(500, .internalServerError))], now: t0)   // b waits for a retry
        _ = take(&m)

        m.complete([(slot: 0, answer: answer(403, .badEnvironmentKeyIdInToken))], now: t0)
        let lines = take(&m)
        #expect(lines == ["log error", "finish 1 403 BadEnvironmentKeyIdInToken (\(m.keyRefusal!.error))",
                          "finish 0 403 BadEnvironmentKeyIdInToken (\(m.keyRefusal!.error))"])
        #expect(m.keyRefusal!.error.hasPrefix("provider key K (team T) is not valid for the production environment"))
        #expect(m.retries.isEmpty)

        m.enter(caller: 9, "d", taskCancelled: false, now: t0 + .seconds(1))
        #expect(take(&m) == ["fill 0 entrant", "finish 0 403 BadEnvironmentKeyIdInToken (\(m.keyRefusal!.error))"])

        // c was in flight: its own answer is final, and does not log again.
        m.complete([(slot: 2, answer: answer(403, .badEnvironmentKeyIdInToken))], now: t0 + .seconds(1))
        #expect(!take(&m).contains("log error"))

        m.enter(caller: 10, "e", taskCancelled: false, now: t0 + Machine.keyRefusalHold)
        #expect(take(&m) == ["fill 2 entrant", "submit 2"])
        #expect(m.keyRefusal == nil)
    }

    @Test func anExpiredTokenIsRefreshedOnceForItsGenerationAndTheRequestSentAgain() {
        var m = machine()
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(403, .expiredProviderToken)),
                    (slot: 1, answer: answer(403, .expiredProviderToken))], now: t0)
        #expect(tokens.expiredAsked == [1, 1])
        #expect(take(&m) == ["retry 0 now", "retry 1 now", "authorize jwt2", "submit 0", "submit 1"])
        #expect(m.slots[0].generation == 2)
    }

    @Test func aTokenThatCannotBeSignedEndsTheRequestWithWhy() {
        var m = machine()
        tokens.failure = "key file unreadable"
        m.enter(caller: 1, "a", taskCancelled: false, now: t0)
        #expect(take(&m) == ["fill 0 entrant", "finish 0 0 (key file unreadable)", "drained"])
        expectConsistent(m)
    }

    @Test func anExpiredTokenThatCannotBeRefreshedEndsTheRequest() {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        tokens.failure = "key file unreadable"
        m.complete([(slot: 0, answer: answer(403, .expiredProviderToken))], now: t0)
        #expect(take(&m) == ["finish 0 403 ExpiredProviderToken (key file unreadable)", "drained"])
    }

    /// The token is read once a second at most, and a new generation is installed
    /// before the first request that uses it.
    @Test func aNewTokenGenerationIsInstalledBeforeItsFirstRequest() {
        var m = machine()
        m.enter(caller: 1, "a", taskCancelled: false, now: t0)
        _ = take(&m)
        tokens.generation = 2
        m.enter(caller: 2, "b", taskCancelled: false, now: t0 + .milliseconds(500))
        #expect(take(&m) == ["fill 1 entrant", "submit 1"])
        m.enter(caller: 3, "c", taskCancelled: false, now: t0 + .seconds(1))
        #expect(take(&m) == ["fill 2 entrant", "authorize jwt2", "submit 2"])
    }

    // MARK: - Cancellation

    @Test func aCancelledCallerInLineLeavesWithoutBeingSent() {
        var m = machine(capacity: 1)
        enter(&m, ["a", "b", "c"])
        _ = take(&m)
        m.cancel(caller: 2)
        #expect(take(&m) == ["not sent b (cancelled before it was sent)"])
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "fill 0 c", "submit 0"])
    }

    @Test func aCancelledCallerInFlightGetsItsAnswerButNoRetry() {
        var m = machine()
        enter(&m, ["a"])
        _ = take(&m)
        m.cancel(caller: 1)
        #expect(take(&m).isEmpty)
        m.complete([(slot: 0, answer: answer(503, .serviceUnavailable))], now: t0)
        #expect(take(&m) == ["finish 0 503 ServiceUnavailable", "drained"])
    }

    @Test func aCallerWhoseTaskIsCancelledIsNeverSent() {
        var m = machine()
        m.enter(caller: 1, "a", taskCancelled: true, now: t0)
        #expect(take(&m) == ["not sent a (cancelled before it was sent)"])
        #expect(m.busy == 0)
    }

    @Test func aCancelledBatchEndsItsRetriesAndSendsNothingAgain() {
        var m = machine(capacity: 3)
        let inbox = Inbox("b1")
        #expect(m.startBatch(count: 2, inbox, now: t0) == .started(2))
        m.enter(caller: 5, "c", taskCancelled: false, now: t0)
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(500, .internalServerError)),
                    (slot: 2, answer: answer(500, .internalServerError))], now: t0)
        _ = take(&m)
        m.cancel(batch: inbox, now: t0)
        #expect(take(&m) == ["finish 0 0 (cancelled before it was sent again)"])
        #expect(m.retries.map(\.slot) == [2])   // the caller's retry stays
        m.complete([(slot: 1, answer: .notProcessed(error: "GOAWAY"))], now: t0)
        #expect(take(&m) == ["finish 1 0 (GOAWAY)"])
    }

    // MARK: - Shutdown

    @Test func closingEndsTheLineAndStopsNewSendsButLetsFlightsFinish() {
        var m = machine(capacity: 1)
        let inbox = Inbox("b1")
        enter(&m, ["a"])
        _ = m.startBatch(count: 1, inbox, now: t0)
        m.enter(caller: 2, "b", taskCancelled: false, now: t0)
        _ = take(&m)
        m.close()
        #expect(take(&m) == ["poke b1", "not sent b (the APNs client is shut down)"])
        m.enter(caller: 3, "c", taskCancelled: false, now: t0)
        #expect(take(&m) == ["not sent c (the APNs client is shut down)"])
        #expect(m.startBatch(count: 1, inbox, now: t0) == .closed)

        // In flight: a retry still goes out, and its answer drains the lane.
        m.complete([(slot: 0, answer: .notProcessed(error: "GOAWAY"))], now: t0)
        #expect(take(&m) == ["retry 0 now", "resend 0"])
        m.complete([(slot: 0, answer: answer(200))], now: t0)
        #expect(take(&m) == ["finish 0 200", "drained"])
    }

    @Test func afterDestroyNothingIsSubmittedAndWhatWasHeldEndsCancelled() {
        var m = machine(maxAttempts: 3)
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.complete([(slot: 0, answer: answer(500, .internalServerError))], now: t0)
        _ = take(&m)
        m.destroy()
        m.timerFired(now: t0 + .seconds(1))
        #expect(take(&m) == ["finish 0 0 (the APNs client is shut down)"])
        m.complete([(slot: 1, answer: .cancelled(error: nil))], now: t0)
        #expect(take(&m) == ["finish 1 0 (cancelled)", "drained"])
    }

    /// The transport took fewer than submitted (it is stopping): those were never
    /// sent, so they end with no attempt and no latency, and a waiter gets the slot.
    @Test func requestsTheTransportRefusedEndUnsentAndFreeTheirSlot() {
        var m = machine(capacity: 1)
        enter(&m, ["a", "b"])
        _ = take(&m)
        m.transportRefused([0], now: t0 + .seconds(1))
        #expect(ending(m) == LaneEnding(status: 0, error: "the APNs client is shut down", attempts: 0, latency: .zero))
        #expect(take(&m) == ["finish 0 0 (the APNs client is shut down)", "fill 0 b", "submit 0"])
    }

    // MARK: - Invariants under any order of events

    /// Random events, many times over: the slots always add up, every request ends
    /// exactly once, and after the lane closes and everything is answered it drains.
    @Test(.ownThread) func everyRequestEndsExactlyOnceWhateverTheOrderOfEvents() {
        var rng = SeededRandom(seed: 42)
        for _ in 0..<200 {
            var m = machine(capacity: 3, maxAttempts: 3)
            var now = t0
            var outstanding = Set<String>()   // callers entered, not ended
            var inFlight = Set<Int>()          // slots submitted, not answered
            var ended: [String: Int] = [:]
            var next = 0
            var owners: [Int: String] = [:]   // slot: the caller filled into it
            func apply(_ m: inout Machine) {
                for action in m.actions {
                    switch action {
                    case .fill(let slot, .entrant): owners[slot] = "c\(next)"
                    case .fill(let slot, .waiter(let c)): owners[slot] = c
                    case .submit(let slot, _): inFlight.insert(slot)
                    case .finish(let slot, _):
                        inFlight.remove(slot)
                        let who = owners[slot]
                        owners[slot] = nil
                        if let who { ended[who, default: 0] += 1; outstanding.remove(who) }
                    case .notSent(let c, _): ended[c, default: 0] += 1; outstanding.remove(c)
                    default: break
                    }
                }
                m.actions.removeAll()
            }
            for _ in 0..<60 {
                now += .milliseconds(Int.random(in: 0...400, using: &rng))
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<4:
                    next += 1
                    outstanding.insert("c\(next)")
                    m.enter(caller: next, "c\(next)", taskCancelled: false, now: now)
                case 4..<8 where !inFlight.isEmpty:
                    let slot = inFlight.randomElement(using: &rng)!
                    inFlight.remove(slot)
                    let answers: [LaneAnswer] = [answer(200), answer(410, .unregistered), answer(503),
                                                 answer(403, .unrelatedKeyIdInToken), .notProcessed(error: nil),
                                                 .timedOut(error: nil), .connectFailed(error: nil)]
                    m.complete([(slot: slot, answer: answers.randomElement(using: &rng)!)], now: now)
                case 8: m.timerFired(now: now)
                default: if next > 0 { m.cancel(caller: Int.random(in: 1...next, using: &rng)) }
                }
                apply(&m)
                expectConsistent(m)
            }
            m.close()
            apply(&m)
            var guardRounds = 0
            while !m.isDrained && guardRounds < 10_000 {
                guardRounds += 1
                now += .seconds(31)
                if let slot = inFlight.first {
                    inFlight.remove(slot)
                    m.complete([(slot: slot, answer: answer(200))], now: now)
                } else {
                    m.timerFired(now: now)
                }
                apply(&m)
            }
            #expect(m.isDrained && m.retries.isEmpty && m.waiting == 0)
            #expect(outstanding.isEmpty)
            #expect(ended.values.allSatisfy { $0 == 1 })
            #expect(ended.count == next)
        }
    }

    /// Batches and single callers on a small lane, in random order: a batch runs
    /// (starts what fits) when it is woken, at a random later moment, and now and then
    /// on its own (its results woke it); some stop sending (cancelled). Every request
    /// of every batch that goes on is started and ends once, and no batch is stranded:
    /// answering what is in flight and running the woken batches always finishes them.
    @Test(.ownThread) func batchesSharingALaneAllFinishWhateverTheOrderOfEvents() {
        var rng = SeededRandom(seed: 7)
        for _ in 0..<500 {
            var m = machine(capacity: 2, maxAttempts: 3)
            var now = t0
            let inboxes = (0..<6).map { Inbox("b\($0)") }
            var left = inboxes.map { _ in Int.random(in: 1...12, using: &rng) }   // not started yet
            let total = left.reduce(0, +)
            var ended = Array(repeating: 0, count: inboxes.count)
            var stopped = Array(repeating: false, count: inboxes.count)
            var woken = Set<Int>()
            var inFlight = Set<Int>()
            var owners: [Int: Int] = [:]   // slot: the batch (or -1, a caller) filled into it
            var runner = -1
            func index(_ inbox: Inbox) -> Int { inboxes.firstIndex { $0 === inbox }! }
            func apply(_ m: inout Machine) {
                for action in m.actions {
                    switch action {
                    case .fill(let slot, .batchItem): owners[slot] = runner
                    case .fill(let slot, _): owners[slot] = -1
                    case .submit(let slot, _): inFlight.insert(slot)
                    case .finish(let slot, _):
                        inFlight.remove(slot)
                        if let b = owners.removeValue(forKey: slot), b >= 0 { ended[b] += 1 }
                    case .poke(let inbox): woken.insert(index(inbox))
                    default: break
                    }
                }
                m.actions.removeAll()
            }
            func run(_ b: Int, _ m: inout Machine) {
                woken.remove(b)
                guard !stopped[b], left[b] > 0 else { return }
                runner = b
                if case .started(let n) = m.startBatch(count: left[b], inboxes[b], now: now) { left[b] -= n }
                apply(&m)
            }
            for b in inboxes.indices { run(b, &m) }
            var rounds = 0
            while (inFlight.count > 0 || !woken.isEmpty || !m.retries.isEmpty) && rounds < 10_000 {
                rounds += 1
                now += .milliseconds(Int.random(in: 0...300, using: &rng))
                switch Int.random(in: 0..<13, using: &rng) {
                case 0..<5 where !inFlight.isEmpty:
                    let slot = inFlight.randomElement(using: &rng)!
                    inFlight.remove(slot)
                    let answers: [LaneAnswer] = [answer(200), answer(200), answer(410, .unregistered), answer(503),
                                                 .notProcessed(error: nil), .timedOut(error: nil)]
                    m.complete([(slot: slot, answer: answers.randomElement(using: &rng)!)], now: now)
                case 5..<8 where !woken.isEmpty: run(woken.randomElement(using: &rng)!, &m)
                case 8..<10: run(Int.random(in: 0..<inboxes.count, using: &rng), &m)
                case 10: m.enter(caller: rounds, "c\(rounds)", taskCancelled: false, now: now)
                case 11 where Int.random(in: 0..<4, using: &rng) == 0:
                    let b = Int.random(in: 0..<inboxes.count, using: &rng)
                    if !stopped[b] {
                        stopped[b] = true
                        m.cancel(batch: inboxes[b], now: now)
                    }
                default: m.timerFired(now: now)
                }
                apply(&m)
                expectConsistent(m)
            }
            // Nothing in flight, no retry due, no batch woken: every batch that went on
            // has started everything, and everything started has ended.
            for b in inboxes.indices where !stopped[b] {
                #expect(left[b] == 0, "batch \(b) stranded with \(left[b]) not started")
            }
            #expect(m.isDrained && m.batches.isEmpty)
            #expect(ended.reduce(0, +) == total - left.reduce(0, +))
        }
    }
}

/// A small deterministic generator (SplitMix64), so a failing sequence repeats.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
