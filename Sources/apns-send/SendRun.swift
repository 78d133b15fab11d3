import APNs
import Dispatch
import Glibc
import Synchronization

/// One run of apns-send after the settings were checked: open the files, send,
/// write every record, summarize. Returns the exit status.
struct SendRun {
    let settings: Settings

    func run() async -> Int32 {
        switch settings.input {
        case .tokens(_, let tokensPath, let notification):
            return await runTokens(path: tokensPath, notification: notification)
        case .messages(let path, let defaults):
            return await runMessages(path: path, defaults: defaults)
        }
    }

    private func runTokens(path: String, notification: APNs.Notification) async -> Int32 {
        let tokens: TokenLines, writer: ResultWriter, client: APNsClient
        do throws(UsageError) {
            tokens = try TokenLines(path: path, resumed: settings.resumed)
            guard tokens.hasTokenLines() else {
                throw UsageError(path, tokens.failure ?? "no token lines (only blank lines and # comments)")
            }
            (writer, client) = try prepare()
        } catch {
            Stderr.line(error.message)
            return 2
        }
        if settings.dryRun {
            return await DryRun(settings: settings, client: client).run(tokens: tokens, writer: writer, notification: notification)
        }
        let progress = Stderr.isTerminal ? makeProgress(client: client, reader: tokens.reader) : nil
        // Nothing the loop does can wait on someone else: it runs with the answers.
        let executor: any TaskExecutor
        if tokens.reader.size != nil, writer.neverWaits, progress == nil, let sender = try? client.senderExecutor() {
            executor = sender
        } else {
            executor = SerialQueueExecutor(label: "apns-send.io")
        }
        nonisolated(unsafe) let input = tokens   // handed to the send task, not used here again
        let outcome = await interruptible(reading: "tokens", on: executor) {
            let tokens = input
            var outcome = Outcome()
            var results = client.send(notification, nextToken: { tokens.next() }).makeAsyncIterator()
            func take(_ result: borrowing DeliveryResult) {
                writer.write(result)
                outcome.tally.add(result)
                progress?.count(delivered: result.isDelivered)
            }
            // Each result that arrived meanwhile is taken without an async call.
            while let result = await results.next() {
                take(result)
                results.forEachReady(take)
            }
            if Task.isCancelled { outcome.notAttempted = tokens.countRemaining() }
            outcome.duplicates = tokens.duplicates
            outcome.settled = tokens.settled
            outcome.readError = tokens.failure
            return outcome
        }
        progress?.finish()
        return await finish(outcome, client: client, writer: writer, noun: "token")
    }

    /// `--messages`: each line's message, or its local record when it cannot be
    /// sent (written as the line is read, so the file is never held).
    private func runMessages(path: String, defaults: MessageDefaults) async -> Int32 {
        let lines: MessageLines, writer: ResultWriter, client: APNsClient
        do throws(UsageError) {
            lines = try MessageLines(path: path, defaults: defaults, resumed: settings.resumed)
            guard lines.hasMessageLines() else {
                throw UsageError(path, lines.failure ?? "no message lines (the file is empty or blank)")
            }
            (writer, client) = try prepare()
        } catch {
            Stderr.line(error.message)
            return 2
        }
        if settings.dryRun {
            return await DryRun(settings: settings, client: client).run(messages: lines, writer: writer)
        }
        let progress = Stderr.isTerminal ? makeProgress(client: client, reader: lines.reader) : nil
        // Local records come from inside the library's reads of `lines`; the results loop adds its own.
        let local = LocalTally()
        lines.refused = { record, context in
            writer.write(record, context: context)
            local.add(record)
            progress?.count(delivered: false)
        }
        nonisolated(unsafe) let input = lines   // handed to the send task, not used here again
        var outcome = await interruptible(reading: "messages", on: SerialQueueExecutor(label: "apns-send.io")) {
            let lines = input
            var outcome = Outcome()
            for await r in client.send(lines) as MessageResults<LineContext> {
                writer.write(r.result, context: r.context)
                outcome.tally.add(r.result)
                progress?.count(delivered: r.result.isDelivered)
            }
            if Task.isCancelled { outcome.notAttempted = lines.countRemaining() }
            outcome.settled = lines.settled
            outcome.readError = lines.failure
            return outcome
        }
        progress?.finish()
        outcome.tally.add(local.tally)
        return await finish(outcome, client: client, writer: writer, noun: "message")
    }

    /// The last checks that need the output file and the transport; nothing is sent yet.
    private func prepare() throws(UsageError) -> (ResultWriter, APNsClient) {
        let writer: ResultWriter
        do {
            writer = try ResultWriter(path: settings.outputPath, format: settings.format, layout: settings.input.layout,
                                      append: settings.resumed != nil)
        } catch {
            throw UsageError(settings.outputPath ?? "stdout", error.reason)
        }
        do {
            return (writer, try APNsClient(configuration: settings.configuration))
        } catch {
            _ = writer.finish()
            throw UsageError(error.description)
        }
    }

    private func finish(_ outcome: Outcome, client: APNsClient, writer: ResultWriter, noun: String) async -> Int32 {
        await client.shutdown()
        let writeError = writer.finish()
        report(outcome, statistics: client.statistics, writeError: writeError, output: writer.name, noun: noun)
        // With --resume, the status is about this run's lines; none left to send is success.
        let delivered = outcome.tally.allDelivered || (outcome.tally.records == 0 && outcome.settled > 0)
        let ok = delivered && !outcome.interrupted && outcome.readError == nil && writeError == nil
        return ok ? 0 : 1
    }

    struct Outcome: Sendable {
        var tally = Tally()
        var interrupted = false
        var notAttempted = 0
        var duplicates = 0
        /// Lines skipped because the resumed file settled them.
        var settled = 0
        var readError: String?
        var elapsed: Duration = .zero
    }

    /// Runs the send loop on `executor`: the sender's thread, with the answers, when
    /// none of its reads and writes can wait on someone else (a pipe's reader, a
    /// terminal), else a thread of its own (`SerialQueueExecutor`), never the cooperative pool.
    /// SIGINT or SIGTERM cancels it, after which the library stops reading input and
    /// returns the results of the requests in flight.
    private func interruptible(reading what: String, on executor: any TaskExecutor,
                               _ body: @escaping @Sendable () async -> Outcome) async -> Outcome {
        let interrupted = Atomic<Bool>(false)
        // Handlers first: a signal that came before them would be lost (SIG_IGN) or fatal.
        let running = Mutex<Task<Outcome, Never>?>(nil)
        let signals = Signals.onInterrupt {
            if !interrupted.exchange(true, ordering: .relaxed) {
                Stderr.line("interrupted: not reading more \(what), waiting for the requests in flight")
            }
            running.withLock { $0?.cancel() }
        }
        let task = Task {
            await withTaskExecutorPreference(executor) {
                let start = ContinuousClock.now
                var outcome = await body()
                outcome.elapsed = ContinuousClock.now - start
                return outcome
            }
        }
        running.withLock { $0 = task }
        if interrupted.load(ordering: .relaxed) { task.cancel() }
        var outcome = await task.value
        signals.cancel()
        outcome.interrupted = interrupted.load(ordering: .relaxed)
        return outcome
    }

    private func makeProgress(client: APNsClient, reader: LineReader) -> ProgressBar {
        let size = reader.size
        return ProgressBar(sent: { client.statistics.requestsStarted }) { [reader = UncheckedSendable(reader)] in
            guard let size, size > 0 else { return nil }
            return Double(reader.value.consumed.load(ordering: .relaxed)) / Double(size)
        }
    }

    private func report(_ o: Outcome, statistics s: Statistics, writeError: String?, output: String, noun: String) {
        let t = o.tally
        var skipped = ""
        if o.duplicates > 0 { skipped += "; \(o.duplicates) duplicate line\(o.duplicates == 1 ? "" : "s") skipped" }
        if o.settled > 0, let resumed = settings.resumed {
            let what = settings.input.layout == .messages ? "line" : "token"
            skipped += "; \(o.settled) \(what)\(o.settled == 1 ? "" : "s") already settled in \(resumed.path) skipped"
        }
        let list = t.records == 0 ? "nothing left to send" : t.outcomeList
        Stderr.line("\(t.records) \(noun)\(t.records == 1 ? "" : "s"): \(t.delivered) delivered; \(list)\(skipped)")
        let seconds = o.elapsed.seconds
        let rate = seconds > 0 ? Double(t.records) / seconds : 0
        Stderr.line("\(format(rate)) notifications/s over \(format(seconds, digits: seconds < 10 ? 3 : 1)) s; connections opened \(s.connectionsOpened), "
            + "lost \(s.connectionsLost); JWTs signed \(s.jwtSignatures)")
        if t.endpointUnreachable {
            if settings.input.layout == .messages {
                Stderr.line("endpoint unreachable: \(t.firstError ?? "no answer")")
            } else {
                Stderr.line("endpoint \(settings.endpointDescription) unreachable: \(unprefixed(t.firstError ?? "no answer"))")
            }
        }
        if let error = o.readError { Stderr.line("\(settings.input.linesPath): read error: \(error); later lines not sent") }
        if let error = writeError { Stderr.line("\(output): write error: \(error); records were lost") }
        if o.interrupted {
            let lines = settings.input.layout == .messages ? "message line" : "token line"
            Stderr.line("interrupted: \(o.notAttempted) \(lines)\(o.notAttempted == 1 ? " was" : "s were") not attempted; \(resumeHint)")
        }
    }

    /// How to send the rest after an interruption.
    private var resumeHint: String {
        if settings.resumed != nil { return "run the same command again to send the rest" }
        guard let output = settings.outputPath else {
            return "write records with --output FILE next time, so that --resume FILE can send the rest"
        }
        return "run the same command with --resume \(output) (instead of --output) to send the rest"
    }

    /// The library's error without its leading "host:port: ", which the line already names.
    private func unprefixed(_ error: String) -> String {
        let prefix = "\(settings.endpoints.hostPort(settings.endpoints.environment)): "
        return error.hasPrefix(prefix) ? String(error.dropFirst(prefix.count)) : error
    }

    private func format(_ x: Double, digits: Int = 1) -> String {
        var scale = 1
        for _ in 0..<digits { scale *= 10 }
        let n = Int((x * Double(scale)).rounded())
        let fraction = String(n % scale)
        return "\(n / scale)." + String(repeating: "0", count: digits - fraction.count) + fraction
    }
}

/// The tally of records written from the reading side (local refusals of message lines).
final class LocalTally: Sendable {
    private let state = Mutex(Tally())

    func add(_ record: DeliveryResult) {
        state.withLock { $0.add(record) }
    }

    var tally: Tally { state.withLock { $0 } }
}

/// A value used from one task at a time, moved across a boundary Swift cannot check.
struct UncheckedSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
