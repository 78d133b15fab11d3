import APNs

/// Counts the records of a run, for the summary and the exit status.
struct Tally {
    private(set) var records = 0
    private(set) var delivered = 0
    /// Records that got an HTTP answer from the server.
    private(set) var answered = 0
    /// Records of tokens that were sent at least once.
    private(set) var sent = 0
    /// "200", "410 Unregistered", "0 BadDeviceToken", "0 no answer" -> count, less
    /// `plain200`.
    private var outcomes: [String: Int] = [:]
    /// The "200"s, most records of most runs: counted without a label to build and hash.
    private var plain200 = 0
    /// The first reason given for a token sent without an answer (status 0).
    private(set) var firstError: String?

    mutating func add(_ r: DeliveryResult) {
        records += 1
        if r.isDelivered { delivered += 1 }
        if r.status != 0 { answered += 1 }
        if r.attempts > 0 { sent += 1 }
        if r.status == 0, r.reason == nil, firstError == nil { firstError = r.error }
        if r.status == 200, r.reason == nil {
            plain200 += 1
            return
        }
        let label = r.reason.map { "\(r.status) \($0.rawValue)" } ?? (r.status == 0 ? "0 no answer" : "\(r.status)")
        outcomes[label, default: 0] += 1
    }

    /// Adds another tally's counts (records written elsewhere, e.g. local refusals).
    mutating func add(_ other: Tally) {
        records += other.records
        delivered += other.delivered
        answered += other.answered
        sent += other.sent
        if firstError == nil { firstError = other.firstError }
        for (label, n) in other.outcomes { outcomes[label, default: 0] += n }
        plain200 += other.plain200
    }

    var allDelivered: Bool { records > 0 && delivered == records }

    /// True when tokens were sent but not one got an answer: the endpoint is the problem.
    var endpointUnreachable: Bool { sent > 0 && answered == 0 && firstError != nil }

    /// "7 × 200, 1 × 410 Unregistered, ...", by status then reason.
    var outcomeList: String {
        var all = outcomes
        if plain200 > 0 { all["200", default: 0] += plain200 }
        return all.sorted { $0.key.statusOrder < $1.key.statusOrder }
            .map { "\($0.value) × \($0.key)" }
            .joined(separator: ", ")
    }
}

extension String {
    /// By status (all three digits) then reason; status 0 (no answer) last.
    fileprivate var statusOrder: String {
        hasPrefix("0 ") ? "~" + self : self
    }
}
