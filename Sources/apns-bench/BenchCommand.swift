import APNs
import ArgumentParser

/// `apns-bench`: sends N notifications through the library to an APNs mock and
/// reports like h2load: rate, latency percentiles, CPU per 1k notifications, peak
/// memory, provider tokens signed and connections opened.
@main
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-bench",
        abstract: "Load the APNs library against a mock APNs server and report throughput, latency, CPU and memory.",
        discussion: """
            Without --endpoint an apns-mock runs inside this process (its CPU then counts in \
            the figures; give --endpoint for the client's alone). Key material comes from \
            --pki DIR (made by scripts/gen-pki.sh) or is generated into a temporary folder. \
            Loopback only: the endpoint must be 127.0.0.1 or localhost.
            """
    )

    @Option(name: [.customShort("n"), .customLong("requests")], help: "Notifications to send (default 1000000; 100000 with --quick).")
    var requests: Int?

    @Flag(help: "A quick run: 100000 notifications unless -n says otherwise.")
    var quick = false

    @Option(help: "HTTP/2 connections.")
    var connections = 1

    @Option(help: "Requests in flight at once (the client's maxInFlight).")
    var streams = 1000

    @Option(help: ArgumentHelp(
        "Per-event sends: N callers each send one notification at a time, each with its own payload, until -n are sent (default: one batch).",
        valueName: "N"))
    var callers: Int?

    @Option(help: ArgumentHelp(
        "Message sends as apns-server's outbox worker makes them: the -n tokens go as batches of B `Message<Int>`s (context: the index in the batch, an apns-id each), one `send` of an array per batch, up to 3 batches at once.",
        valueName: "B"))
    var messages: Int?

    @Option(help: ArgumentHelp(
        "Where the one batch's `for await` loop runs: task (a detached task) or main (the main actor, as top-level code).",
        valueName: "task|main"))
    var loop = "task"

    @Option(help: "nghttp2 or curl.")
    var transport = "nghttp2"

    @Option(help: ArgumentHelp("The payload (a JSON object); default a 231-byte alert.", valueName: "PAYLOAD.json"))
    var payload: String?

    @Option(help: ArgumentHelp("A running mock instead of the in-process one (needs --pki).", valueName: "https://127.0.0.1:PORT"))
    var endpoint: String?

    @Option(help: ArgumentHelp("CA the endpoint's certificate chains to (default: DIR/ca.pem of --pki).", valueName: "CA.pem"))
    var cacert: String?

    @Option(help: ArgumentHelp("Key material from scripts/gen-pki.sh: ids.env, AuthKey_<KEY_ID>.p8, ca.pem, server.*.", valueName: "DIR"))
    var pki: String?

    @Option(name: .customLong("mock-latency"), help: "In-process mock only: delay of every answer, in milliseconds.")
    var mockLatency = 0

    @Flag(help: "Print one JSON object instead of text.")
    var json = false

    func validate() throws {
        guard Transport(rawValue: transport) != nil else { throw ValidationError("--transport: curl or nghttp2") }
        guard connections >= 1, streams >= 1 else { throw ValidationError("--connections and --streams must be at least 1") }
        if let requests, requests < 1 { throw ValidationError("-n must be at least 1") }
        if let callers, callers < 1 { throw ValidationError("--callers must be at least 1") }
        if let messages, messages < 1 { throw ValidationError("--messages must be at least 1") }
        guard let loop = Workload.Loop(rawValue: loop) else { throw ValidationError("--loop: task or main") }
        if loop == .main && (callers != nil || messages != nil) {
            throw ValidationError("--loop main is the one-batch workload: give neither --callers nor --messages")
        }
        if callers != nil && messages != nil { throw ValidationError("--callers and --messages are two different workloads: give one") }
        if endpoint != nil && pki == nil { throw ValidationError("--endpoint needs --pki DIR (the mock's key material)") }
    }

    func run() async throws {
        let keys = try await KeyMaterial.load(from: pki)
        let target = try Target(endpoint: endpoint, cacert: cacert, keys: keys, mockLatencyMS: mockLatency)
        defer { target.stop() }
        let workload = try Workload(
            count: requests ?? (quick ? 100_000 : 1_000_000), keys: keys, payloadPath: payload,
            transport: Transport(rawValue: transport)!, connections: connections, streams: streams, callers: callers,
            messageBatch: messages, loop: Workload.Loop(rawValue: loop)!)
        let report = try await workload.run(against: target)
        print(json ? report.json() : report.text())
    }
}
