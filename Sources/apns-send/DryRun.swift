import APNs

/// `--dry-run`: everything a real run checks (payload, credentials with a signed
/// provider token, CA file, every token line), then a description of what would
/// be sent, and no connection. Malformed token lines get their records as in a
/// real run; well-formed ones are only counted.
struct DryRun {
    let settings: Settings
    let client: APNsClient

    func run(tokens: TokenLines, writer: ResultWriter) async -> Int32 {
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
        describe(valid: valid, malformed: malformed, duplicates: tokens.duplicates, settled: tokens.settled,
                 signatures: signatures)
        if let failure = tokens.failure { Stderr.line("\(settings.tokensPath): read error: \(failure)") }
        if let writeError { Stderr.line("\(writer.name): write error: \(writeError)") }
        return 0
    }

    private func describe(valid: Int, malformed: Int, duplicates: Int, settled: Int, signatures: Int) {
        let n = settings.notification, c = settings.configuration
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
              auth      ES256 provider token signed (kid \(c.credentials.keyID), iss \(c.credentials.teamID); \(signatures) signature\(signatures == 1 ? "" : "s"))
              payload   \(n.payload.count) bytes: \(payload)
              tokens    \(valid) would be sent, \(malformed) malformed (records written to \(settings.outputPath ?? "stdout")), \(duplicates) duplicate line\(duplicates == 1 ? "" : "s") skipped\(settled > 0 ? ", \(settled) already settled in \(settings.outputPath ?? "") skipped" : "")

            """)
    }
}
