import ArgumentParser

/// The command line as typed; `Settings` turns it into something that can send.
/// Values with a fixed set of spellings stay strings here so that a wrong one gets
/// the same one-line error and exit status 2 as every other input problem.
struct Options: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-send",
        abstract: "Send one notification payload to every device token in a file, or a file of messages, through APNs.",
        usage: """
            apns-send --topic TOPIC [--key AuthKey_XXXX.p8 --key-id ID --team-id ID | --config FILE
                                     | --certificate FILE.p12|FILE.pem [--certificate-password-file FILE]]
                      [--env sandbox|production] [--endpoint https://HOST:PORT] [--cacert CA.pem]
                      [--sandbox-endpoint https://HOST:PORT] [--production-endpoint https://HOST:PORT]
                      [--push-type alert|background|voip|...] [--priority 10|5|1] [--expiration UNIX]
                      [--collapse-id ID] [--output results.jsonl | --resume results.jsonl] [--format jsonl|csv]
                      [--concurrency N] [--connections N] [--transport nghttp2|curl] [--timeout SECONDS]
                      [--retries N] [--proxy http://[USER:PASS@]HOST:PORT]
                      [--dry-run] PAYLOAD.json TOKENS.txt   |   --messages MESSAGES.jsonl
            apns-send --topic BUNDLE_ID ... [--management-endpoint https://HOST:PORT]
                      --broadcast CHANNEL_ID [--priority 10|5|1] [--expiration UNIX] PAYLOAD.json
                      | --create-channel [--storage-policy 0|1] | --read-channel ID
                      | --delete-channel ID | --list-channels
            apns-send doctor --topic BUNDLE_ID [credentials] [--env ...] [--endpoint ...] [--cacert ...] [--proxy ...]
            """,
        discussion: """
            Credentials: --key, --key-id and --team-id, or a --config file (the format of \
            keys.example: KEY=value lines, # comments, optional quotes; keys APNS_KEY_PATH, \
            APNS_KEY_ID, APNS_TEAM_ID, APNS_TOPIC, APNS_ENV, APNS_PROXY; a relative APNS_KEY_PATH is relative \
            to the file's folder), or the environment variables of the same names. \
            Precedence: flag > config file > environment.

            Certificate auth, in place of a provider key: --certificate FILE.p12|FILE.pem (an \
            Apple Push Services certificate with its private key; a PEM holds both), and \
            --certificate-password-file FILE when it has a password (the file's first line; a \
            password is never taken on the command line). No authorization header is sent: the \
            TLS client certificate identifies the app. Config and environment keys: \
            APNS_CERTIFICATE_PATH, APNS_CERTIFICATE_PASSWORD_FILE. A wrong password, an expired \
            certificate or a key that does not match stops the run before anything is sent (exit 2).

            TOKENS.txt: one token per line; surrounding spaces trimmed; blank lines and lines \
            starting with # skipped; upper-case hex accepted (sent lower-case); a repeated token \
            is sent once. A line that is not 64 to 200 hex digits (an even count) gets a record \
            with status 0 and reason BadDeviceToken and is never sent. CRLF files work.

            MESSAGES.jsonl (--messages, in place of PAYLOAD.json TOKENS.txt): one message per line, \
            {"token":"<hex>","payload":{"aps":{...},...},"id":"evt-1","push_type":"background",\
            "priority":5,"collapse_id":"order-7","expiration":0,"topic":"...","environment":"sandbox"}. \
            Only token and payload are required; the header flags (--topic, --push-type, --priority, \
            --expiration, --collapse-id) and --env are the defaults of the lines that leave a key out \
            (without them: alert, no apns-priority header, which APNs takes as 10 and which is 5 \
            for background, no expiration or collapse id; --topic is needed only by lines without \
            "topic"). A null value counts as the key left out; unknown keys are ignored. Blank \
            lines are skipped; repeats are not merged (two lines to one token are two sends). A \
            line that cannot be sent gets a record with status 0 and is never sent, and the rest \
            still go (exit 1): InvalidMessage (not JSON, not an object, no token or payload, a \
            known key given twice or of the wrong type or value: push_type not one APNs knows, \
            priority not 10/5/1, expiration not a whole number 0 or more, id not a string, \
            environment not sandbox/production, a control character in topic or collapse_id; \
            "error" names every problem), BadDeviceToken (token not 64 to 200 hex digits), \
            PayloadTooLarge (payload over 4096 bytes, 5120 for voip, after white space is \
            removed). Records add "line" (1-based, as an editor counts, blank lines included) and \
            "id" (when the line gave one). A line's apns-id is derived from its number and text, so \
            a line sent again by --resume carries the same one. The file is read as it is sent, \
            never whole; it may be a pipe (/dev/stdin).

            Output: one record per distinct token line, written as results arrive: \
            {"token","status","apns_id","reason","timestamp","attempts"}; status is the HTTP \
            status (0 when no answer from APNs was obtained), apns_id null when never sent, \
            reason null when none, timestamp (ms) on 410 only. JSON Lines add "error" when \
            status is 0 and there is an error text. Progress (when stderr is a terminal) and a \
            summary go to stderr. SIGINT/SIGTERM stop reading tokens, wait for the requests in \
            flight, write every record and exit 1.

            With --messages, CSV has the columns token,status,apns_id,reason,timestamp,attempts,\
            line,id,error.

            Resuming: --resume FILE reads the records earlier runs wrote to FILE, skips every \
            token they settled (delivered; or refused for the token itself: 400 BadDeviceToken, \
            400 DeviceTokenNotForTopic, 410, a malformed line) and appends the records of the \
            rest to FILE. A missing FILE is started; a last line cut short by a killed run is \
            dropped and its token sent again. The exit status is about the tokens this run \
            sent (0 when none were left). With --messages it resumes by line: a line is skipped \
            when a record for its line settled it by the same rule, or refused it locally \
            (InvalidMessage, BadDeviceToken, PayloadTooLarge); run it on the same, unchanged file.

            Endpoints: --env names the environment of sends that name none; --endpoint sends \
            that environment's requests elsewhere (a mock). --sandbox-endpoint and \
            --production-endpoint do so for one environment each, for --messages lines that \
            name "environment". An environment without an override goes to Apple's host.

            Proxy: --proxy http://[USER:PASS@]HOST:PORT (or APNS_PROXY in --config or the \
            environment) sends through an HTTP proxy by CONNECT; TLS to APNs runs end to end \
            inside the tunnel and is verified as always. USER and PASS are percent-decoded and \
            sent as Basic credentials; the password is never printed (but a command line is \
            visible to other users: put a password in the --config file). Without one, https_proxy \
            (or HTTPS_PROXY) is used, except for hosts NO_PROXY names (comma list: *, \
            example.com matching its subdomains, IP/bits, host:port), as curl reads them. A \
            proxy that refuses (407, 403, ...) or cannot be reached gives every token a record \
            with status 0 and an error naming the proxy and its answer.

            Dry run: --dry-run checks every input and signs a provider token, and sends nothing; \
            malformed token lines and (with --messages) every line that cannot be sent get their \
            records. With --messages it exits 1 when some line cannot be sent, else 0.

            Broadcast push (iOS 18): --broadcast CHANNEL_ID sends PAYLOAD.json (a Live Activity \
            update or end, at most 5120 bytes) once to the channel of the app --topic names, with \
            apns-push-type liveactivity and apns-expiration 0 unless --expiration says otherwise \
            (a channel that stores nothing takes only 0). --create-channel (with --storage-policy \
            0: no message stored, or 1: the most recent; default 0), --read-channel ID, \
            --delete-channel ID and --list-channels manage the app's channels on APNs' management \
            host (api-manage-broadcast..., port 2196, sandbox 2195; --management-endpoint elsewhere, \
            by default the --endpoint when one is given). Each prints one record: \
            {"operation","status","apns_request_id","channel_id","reason",...}; a broadcast's \
            record is {"channel_id","status","apns_request_id","apns_unique_id","reason","attempts"}.

            Doctor: apns-send doctor, with the same credentials, --config, --env, --endpoint, \
            --cacert, --proxy and --timeout, sends no notification; it checks the set-up and \
            prints one line per check, ✓ or ✗ with what to do: the key file (format, \
            permissions, key id, team id) or the certificate (dates, topic, environment), DNS \
            for both APNs hosts (or the --endpoint's), TCP, the proxy, TLS with the chain it \
            verified and its root, the clock against APNs' date header, and one authenticated \
            request to the all-zero device token, which APNs refuses with 400 BadDeviceToken \
            once it accepted the credentials. Exit 0 when every check passed, 1 otherwise.

            Exit status: 0 every token (message) delivered; 1 some not delivered (malformed tokens \
            or message lines, APNs refusals, unreachable endpoint, interrupted); 2 nothing sent because of a usage, \
            input or configuration error (one line on stderr says which).
            """,
        version: buildVersionLine
    )

    @Option(help: "The app's bundle id (APNS_TOPIC); the push type's suffix (.voip, ...) is added when missing. With --messages, for lines without \"topic\".")
    var topic: String?

    @Option(help: ArgumentHelp("The provider key, AuthKey_XXXX.p8 (APNS_KEY_PATH).", valueName: "AuthKey_XXXX.p8"))
    var key: String?

    @Option(name: .customLong("key-id"), help: "The key's 10-character Key ID (APNS_KEY_ID).")
    var keyID: String?

    @Option(name: .customLong("team-id"), help: "The 10-character Team ID (APNS_TEAM_ID).")
    var teamID: String?

    @Option(help: ArgumentHelp("Certificate auth instead of --key: the Apple Push Services certificate and its key (APNS_CERTIFICATE_PATH).",
                               valueName: "FILE.p12|FILE.pem"))
    var certificate: String?

    @Option(name: .customLong("certificate-password-file"),
            help: ArgumentHelp("A file whose first line is the certificate's password (APNS_CERTIFICATE_PASSWORD_FILE).",
                               valueName: "file"))
    var certificatePasswordFile: String?

    @Option(help: ArgumentHelp("A file of APNS_* settings in the format of keys.example.", valueName: "file"))
    var config: String?

    @Option(help: "sandbox or production (APNS_ENV; default production).")
    var env: String?

    @Option(help: ArgumentHelp("Send to https://HOST:PORT instead of Apple's host for --env (a mock).",
                               valueName: "https://HOST:PORT"))
    var endpoint: String?

    @Option(name: .customLong("sandbox-endpoint"),
            help: ArgumentHelp("Send sandbox requests to https://HOST:PORT instead of Apple's sandbox host.",
                               valueName: "https://HOST:PORT"))
    var sandboxEndpoint: String?

    @Option(name: .customLong("production-endpoint"),
            help: ArgumentHelp("Send production requests to https://HOST:PORT instead of Apple's host.",
                               valueName: "https://HOST:PORT"))
    var productionEndpoint: String?

    @Option(help: ArgumentHelp("A CA certificate (PEM) to trust on top of the system's. Verification is never turned off.",
                               valueName: "CA.pem"))
    var cacert: String?

    @Option(name: .customLong("push-type"),
            help: "alert, background, voip, complication, fileprovider, mdm, liveactivity, location, pushtotalk, widgets, controls or accessory (default alert). A widgets push carries {\"aps\":{\"content-changed\":true}}.")
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

    @Option(help: ArgumentHelp("Send through this HTTP proxy by CONNECT (APNS_PROXY; else https_proxy/HTTPS_PROXY with NO_PROXY).",
                               valueName: "http://[USER:PASS@]HOST:PORT"))
    var proxy: String?

    @Flag(name: .customLong("dry-run"),
          help: "Validate everything and sign a provider token, but send nothing; malformed lines still get their records.")
    var dryRun = false

    @Option(help: ArgumentHelp("Send the messages of this file, one JSON object a line, instead of PAYLOAD.json to TOKENS.txt.",
                               valueName: "MESSAGES.jsonl"))
    var messages: String?

    @Option(help: ArgumentHelp("Send PAYLOAD.json to this broadcast channel (iOS 18) instead of to tokens.",
                               valueName: "CHANNEL_ID"))
    var broadcast: String?

    @Flag(name: .customLong("create-channel"), help: "Create a broadcast channel for --topic's app.")
    var createChannel = false

    @Option(name: .customLong("storage-policy"),
            help: "--create-channel's message-storage-policy: 0 (no message stored, the default) or 1 (the most recent).")
    var storagePolicy: String?

    @Option(name: .customLong("read-channel"), help: ArgumentHelp("Read a broadcast channel's settings.", valueName: "CHANNEL_ID"))
    var readChannel: String?

    @Option(name: .customLong("delete-channel"), help: ArgumentHelp("Delete a broadcast channel.", valueName: "CHANNEL_ID"))
    var deleteChannel: String?

    @Flag(name: .customLong("list-channels"), help: "List the app's broadcast channels.")
    var listChannels = false

    @Option(name: .customLong("management-endpoint"),
            help: ArgumentHelp("Send channel management requests to https://HOST:PORT instead of Apple's management host.",
                               valueName: "https://HOST:PORT"))
    var managementEndpoint: String?

    /// Any broadcast or channel flag: the run is a `BroadcastRun`.
    var isBroadcast: Bool {
        broadcast != nil || createChannel || readChannel != nil || deleteChannel != nil || listChannels ||
            storagePolicy != nil || managementEndpoint != nil
    }

    @Argument(help: ArgumentHelp("The payload: a JSON object, sent with insignificant white space removed.",
                                 valueName: "PAYLOAD.json"))
    var payload: String?

    @Argument(help: ArgumentHelp("Device tokens, one per line.", valueName: "TOKENS.txt"))
    var tokens: String?
}
