import ArgumentParser

/// The command line as typed; `Settings` turns it into something that can send.
/// Values with a fixed set of spellings stay strings here so that a wrong one gets
/// the same one-line error and exit status 2 as every other input problem.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-send",
        abstract: "Send one notification payload to every device token in a file, through APNs.",
        usage: """
            apns-send --topic TOPIC [--key AuthKey_XXXX.p8 --key-id ID --team-id ID | --config FILE]
                      [--env sandbox|production] [--endpoint https://HOST:PORT] [--cacert CA.pem]
                      [--push-type alert|background|voip|...] [--priority 10|5|1] [--expiration UNIX]
                      [--collapse-id ID] [--output results.jsonl | --resume results.jsonl] [--format jsonl|csv]
                      [--concurrency N] [--connections N] [--transport nghttp2|curl] [--timeout SECONDS]
                      [--retries N]
                      [--dry-run] PAYLOAD.json TOKENS.txt
            """,
        discussion: """
            Credentials: --key, --key-id and --team-id, or a --config file (the format of \
            keys.example: KEY=value lines, # comments, optional quotes; keys APNS_KEY_PATH, \
            APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC, APNS_ENV; a relative APNS_KEY_PATH is relative \
            to the file's folder), or the environment variables of the same names. \
            Precedence: flag > config file > environment.

            TOKENS.txt: one token per line; surrounding spaces trimmed; blank lines and lines \
            starting with # skipped; upper-case hex accepted (sent lower-case); a repeated token \
            is sent once. A line that is not 64 to 200 hex digits (an even count) gets a record \
            with status 0 and reason BadDeviceToken and is never sent. CRLF files work.

            Output: one record per distinct token line, written as results arrive: \
            {"token","status","apns_id","reason","timestamp","attempts"}; status is the HTTP \
            status (0 when no answer from APNs was obtained), apns_id null when never sent, \
            reason null when none, timestamp (ms) on 410 only. JSON Lines add "error" when \
            status is 0 and there is an error text. Progress (when stderr is a terminal) and a \
            summary go to stderr. SIGINT/SIGTERM stop reading tokens, wait for the requests in \
            flight, write every record and exit 1.

            Resuming: --resume FILE reads the records earlier runs wrote to FILE, skips every \
            token they settled (delivered; or refused for the token itself: 400 BadDeviceToken, \
            400 DeviceTokenNotForTopic, 410, a malformed line) and appends the records of the \
            rest to FILE. A missing FILE is started; a last line cut short by a killed run is \
            dropped and its token sent again. The exit status is about the tokens this run \
            sent (0 when none were left).

            Exit status: 0 every token delivered; 1 some not delivered (malformed tokens, APNs \
            refusals, unreachable endpoint, interrupted); 2 nothing sent because of a usage, \
            input or configuration error (one line on stderr says which).
            """
    )

    @Option(help: "The app's bundle id (APNS_TOPIC); the push type's suffix (.voip, ...) is added when missing.")
    var topic: String?

    @Option(help: ArgumentHelp("The provider key, AuthKey_XXXX.p8 (APNS_KEY_PATH).", valueName: "AuthKey_XXXX.p8"))
    var key: String?

    @Option(name: .customLong("key-id"), help: "The key's 10-character Key ID (APNS_KEY_ID).")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "The 10-character Team ID (APNS_TEAM_ID).")
    var teamID: String?

    @Option(help: ArgumentHelp("A file of APNS_* settings in the format of keys.example.", valueName: "file"))
    var config: String?

    @Option(help: "sandbox or production (APNS_ENV; default production).")
    var env: String?

    @Option(help: ArgumentHelp("Send to https://HOST:PORT instead of Apple's host for --env (a mock).",
                               valueName: "https://HOST:PORT"))
    var endpoint: String?

    @Option(help: ArgumentHelp("A CA certificate (PEM) to trust on top of the system's. Verification is never turned off.",
                               valueName: "CA.pem"))
    var cacert: String?

    @Option(name: .customLong("push-type"),
            help: "alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets or controls (default alert).")
    var pushType: String?

    @Option(help: "10 (immediate), 5 (power-considerate; the default for background) or 1.")
    var priority: String?

    @Option(help: ArgumentHelp("apns-expiration: UNIX seconds; 0 = deliver now or drop.", valueName: "UNIX"))
    var expiration: Int64?

    @Option(name: .customLong("collapse-id"), help: "apns-collapse-id, at most 64 bytes.")
    var collapseID: String?

    @Option(help: ArgumentHelp("Write records here instead of stdout.", valueName: "results.jsonl"))
    var output: String?

    @Option(help: ArgumentHelp("Skip the tokens FILE's records settled; append the rest's records to FILE.",
                               valueName: "results.jsonl"))
    var resume: String?

    @Option(help: "jsonl or csv (default jsonl; with --resume, the file's).")
    var format: String?

    @Option(help: "Requests in flight at once (default 1000; the server's stream limit also applies).")
    var concurrency: Int?

    @Option(help: "HTTP/2 connections (default 1, as Apple recommends).")
    var connections: Int?

    @Option(help: "nghttp2 (the default: nghttp2 over OpenSSL) or curl (libcurl's multi interface).")
    var transport: String?

    @Option(help: ArgumentHelp("Deadline of one attempt, in seconds (default 30).", valueName: "seconds"))
    var timeout: Double?

    @Option(help: "Retries of a transient failure (429, 500, 503, connection trouble) per token (default 5).")
    var retries: Int?

    @Flag(name: .customLong("dry-run"),
          help: "Validate everything and sign a provider token, but send nothing; malformed token lines still get their records.")
    var dryRun = false

    @Argument(help: ArgumentHelp("The payload: a JSON object, sent with insignificant white space removed.",
                                 valueName: "PAYLOAD.json"))
    var payload: String

    @Argument(help: ArgumentHelp("Device tokens, one per line.", valueName: "TOKENS.txt"))
    var tokens: String
}
