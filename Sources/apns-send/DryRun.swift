import APNs

/// `--dry-run`: everything a real run checks (payload, credentials with a signed
/// provider token, CA file, every input line), then a description of what would
/// be sent, and no connection. Lines that cannot be sent get their records as in a
/// real run (malformed tokens; with --messages every refused line); the rest are
/// only counted.
struct DryRun {
    let settings: Settings
    let client: APNsClient

    func run(tokens: TokenLines, writer: ResultWriter, notification: APNs.Notification) async -> Int32 {
        var valid = 0, malformed = 0
        while let line = tokens.next() {
            if DeviceToken(line) != nil {
                valid += 1
                continue
            }
            malformed += 1
            writer.write(DeliveryResult(token: line, apnsID: nil, status: 0, reason: .badDeviceToken, attempts: 0,
                                        error: "not 64 to 200 hex digits (even count)"))
        }
        let signatures = client.statistics.jwtSignatures
        await client.shutdown()
        let writeError = writer.finish()
        describe(notification, valid: valid, malformed: malformed, duplicates: tokens.duplicates, settled: tokens.settled,
                 signatures: signatures)
        if let failure = tokens.failure { Stderr.line("\(settings.input.linesPath): read error: \(failure)") }
        if let writeError { Stderr.line("\(writer.name): write error: \(writeError)") }
        return 0
    }

    /// Every line parsed and checked as a real run would; exit 1 when some line
    /// cannot be sent (or the file could not be read to its end), else 0.
    func run(messages: MessageLines, writer: ResultWriter) async -> Int32 {
        var refused: [String: Int] = [:]
        messages.refused = { record, context in
            writer.write(record, context: context)
            refused[record.reason?.rawValue ?? "?", default: 0] += 1
        }
        var byEnvironment: [Environment: Int] = [:]
        while let m = messages.next() {
            byEnvironment[m.environment ?? settings.endpoints.environment, default: 0] += 1
        }
        let signatures = client.statistics.jwtSignatures
        await client.shutdown()
        let writeError = writer.finish()

        let c = settings.configuration
        let valid = byEnvironment.values.reduce(0, +), bad = refused.values.reduce(0, +)
        let name = { (e: Environment) in e == .sandbox ? "sandbox" : "production" }
        let targets = byEnvironment.keys.sorted { name($0) < name($1) }
            .map { "\(byEnvironment[$0]!) \(name($0)) → \(settings.endpoints.describe($0))" }
        let reasons = refused.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        var settled = ""
        if messages.settled > 0 { settled = ", \(messages.settled) already settled in \(settings.outputPath ?? "") skipped" }
        Stderr.line("dry run: nothing sent")
        Stderr.write("""
              transport \(c.transport.rawValue), \(c.connections) connection\(c.connections == 1 ? "" : "s") per endpoint, up to \(c.maxInFlight) in flight
              auth      \(c.credentials.dryRunDescription(signatures: signatures))
              messages  \(valid) would be sent\(targets.isEmpty ? "" : " (\(targets.joined(separator: ", ")))"), \(bad) refused\(bad > 0 ? " (\(reasons); records written to \(settings.outputPath ?? "stdout"))" : "")\(settled)

            """)
        if let failure = messages.failure { Stderr.line("\(settings.input.linesPath): read error: \(failure)") }
        if let writeError { Stderr.line("\(writer.name): write error: \(writeError)") }
        return bad == 0 && messages.failure == nil && writeError == nil ? 0 : 1
    }

    private func describe(_ n: APNs.Notification, valid: Int, malformed: Int, duplicates: Int, settled: Int, signatures: Int) {
        let c = settings.configuration
        var headers = ["apns-topic: \(n.topic)", "apns-push-type: \(n.pushType.rawValue)"]
        if let p = n.priority { headers.append("apns-priority: \(p.rawValue)") }
        switch n.expiration {
        case .immediately?: headers.append("apns-expiration: 0")
        case .at(let seconds)?: headers.append("apns-expiration: \(seconds)")
        case nil: break
        }
        if let id = n.collapseID { headers.append("apns-collapse-id: \(id)") }
        let payload = String(decoding: n.payload.bytes, as: UTF8.self)
        Stderr.line("dry run: nothing sent")
        Stderr.write("""
              endpoint  \(settings.endpointDescription) (\(c.transport.rawValue), \(c.connections) connection\(c.connections == 1 ? "" : "s"), up to \(c.maxInFlight) in flight)
              request   POST /3/device/<token>
              headers   \(headers.joined(separator: ", "))
              auth      \(c.credentials.dryRunDescription(signatures: signatures))
              payload   \(n.payload.count) bytes: \(payload)
              tokens    \(valid) would be sent, \(malformed) malformed (records written to \(settings.outputPath ?? "stdout")), \(duplicates) duplicate line\(duplicates == 1 ? "" : "s") skipped\(settled > 0 ? ", \(settled) already settled in \(settings.outputPath ?? "") skipped" : "")

            """)
    }
}
