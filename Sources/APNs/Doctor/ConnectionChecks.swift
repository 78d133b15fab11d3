import CAPNs
import Glibc

/// The way to APNs, step by step: DNS, TCP (to APNs, or to the proxy), the proxy's
/// tunnel, TLS with the chain the verifier built, then one authenticated request
/// whose answer proves the credentials and carries APNs' clock.
enum ConnectionChecks {
    /// A token of the right form that APNs never issues: it is refused (400
    /// BadDeviceToken) only after the credentials and headers were accepted.
    static let unissuedToken = String(repeating: "0", count: 64)

    /// The token's iat may be this far off APNs' clock before APNs objects.
    static let clockTolerance: Int64 = 60

    static func lookups(_ hosts: [String]) -> [Doctor.Check] {
        hosts.map { host in
            switch resolve(host) {
            case .success(let addresses):
                .pass("DNS \(host)", addresses.prefix(3).joined(separator: ", ") + (addresses.count > 3 ? ", ..." : ""))
            case .failure(let why):
                .fail("DNS \(host)", why, fix: "check /etc/resolv.conf and that this network may resolve outside names (or use the proxy)")
            }
        }
    }

    static func run(_ setup: Doctor.Setup, signer: Doctor.RequestSigner, now: () -> Int64) -> [Doctor.Check] {
        let environment = setup.environment
        let endpoint = setup.target
        let proxy = setup.proxy.flatMap { $0.applies(to: endpoint) ? $0 : nil }
        var checks: [Doctor.Check] = []

        // TCP: to APNs, or to the proxy that reaches it.
        let hop = proxy.map { Endpoint(host: $0.host, port: $0.port) } ?? endpoint
        let tcpName = proxy == nil ? "TCP \(endpoint)" : "TCP proxy \(hop)"
        switch connect(hop, timeout: setup.timeout) {
        case .success:
            checks.append(.pass(tcpName, "connected"))
        case .failure(let why):
            checks.append(.fail(tcpName, why, fix: proxy == nil
                ? "allow outgoing TCP to \(endpoint) (APNs also listens on port 2197) or set --proxy"
                : "check --proxy (or https_proxy): nothing answers there"))
            return checks + notReached(proxy != nil, after: tcpName)
        }

        var jwt: String?
        if case .token(let key, let keyID, let teamID) = signer {
            jwt = try? key.sign(keyID: keyID, teamID: teamID, issuedAt: now())
        }
        let topic = setup.topic ?? {
            if case .certificate(let c) = signer { return c.bundleID }
            return nil
        }()
        let result = probe(setup, endpoint: endpoint, proxy: proxy, jwt: jwt, signer: signer, topic: topic)
        let stage = capns_probe_stage(rawValue: UInt32(result.failed_at))
        let error = string(result.error)

        if let proxy {
            if stage == CAPNS_PROBE_PROXY {
                let answer = result.proxy_status > 0 ? "answered CONNECT with \(result.proxy_status)" : error
                checks.append(.fail("proxy \(proxy)", "\(answer) for \(endpoint)", fix: result.proxy_status == 407
                    ? "give the proxy's user and password: --proxy http://USER:PASS@HOST:PORT"
                    : "ask the proxy's administrator to allow CONNECT to \(endpoint.host) port \(endpoint.port)"))
                return checks + notReached(false, after: "proxy")
            }
            checks.append(.pass("proxy \(proxy)", "opened a tunnel to \(endpoint)"))
        }

        switch stage {
        case _ where stage == CAPNS_PROBE_CONNECT || (stage == CAPNS_PROBE_HTTP && result.chain_len == 0):
            checks.append(.fail("TLS", error, fix: "check that \(endpoint) is an APNs host (or the mock) speaking TLS"))
            return checks + notReached(false, after: "TLS")
        case CAPNS_PROBE_TLS:
            let trust = setup.caFile.map { "the system store and \($0)" } ?? "the system store"
            checks.append(.fail("TLS", error, fix: "the server's chain does not end at a root \(trust) holds: install the USERTrust RSA "
                + "Certification Authority root (APNs' since February 2025; Debian/Ubuntu: apt install ca-certificates) or give "
                + "--cacert with the right CA"))
            return checks + notReached(false, after: "TLS")
        default:
            checks.append(.pass("TLS", tlsDetail(result, caFile: setup.caFile)))
        }

        guard stage == CAPNS_PROBE_ANSWERED else {
            checks.append(.fail("request", error, fix: "retry; if it persists, APNs' status page"))
            return checks
        }
        let reason = string(result.reason)
        checks.append(clock(date: string(result.date), reason: reason, now: now()))
        checks.append(request(status: Int(result.status), reason: reason, signer: signer, topic: topic,
                              environment: environment))
        return checks
    }

    // MARK: - The steps' lines

    private static func notReached(_ viaProxy: Bool, after step: String) -> [Doctor.Check] {
        (viaProxy ? ["proxy", "TLS"] : ["TLS"]).filter { $0 != step }.map {
            .fail($0, "not checked", fix: "fix \(step) first")
        } + ["clock", "request"].map { .fail($0, "not checked", fix: "fix \(step) first") }
    }

    private static func tlsDetail(_ r: capns_probe_result, caFile: String?) -> String {
        var chain = withUnsafeBytes(of: r.chain) { raw -> [String] in
            let size = MemoryLayout.size(ofValue: r.chain.0)
            return (0..<Int(r.chain_len)).map { i in
                String(decoding: raw[(i * size)..<((i + 1) * size)].prefix { $0 != 0 }, as: UTF8.self)
            }
        }
        guard let root = chain.popLast() else { return "verified" }
        let from = r.root_from_ca_file != 0 ? caFile.map { "--cacert \($0)" } ?? "--cacert" : "the system store"
        return "verified: \(([root] + chain).reversed().joined(separator: " <- ")); root \(root) from \(from)"
    }

    static func clock(date: String, reason: String, now: Int64) -> Doctor.Check {
        guard let server = parseHTTPDate(date) else {
            if reason == "ExpiredProviderToken" || reason == "InvalidProviderToken" {
                return .fail("clock", "APNs' answer carried no date header to compare with, and it refused the token's iat or signature",
                             fix: "make sure this machine's clock is right (NTP: timedatectl set-ntp true)")
            }
            return .pass("clock", "APNs accepted the token's issue time (its answer carried no date header)")
        }
        let skew = now - server
        guard abs(skew) > clockTolerance else {
            return .pass("clock", "within \(abs(skew)) s of APNs' (the date header of its answer)")
        }
        return .fail("clock", "this machine's clock is \(span(abs(skew))) \(skew < 0 ? "behind" : "ahead of") APNs' "
                     + "(the date header of its answer); provider tokens are judged by APNs' clock",
                     fix: "set the clock right (NTP: timedatectl set-ntp true)")
    }

    static func request(status: Int, reason: String, signer: Doctor.RequestSigner, topic: String?,
                        environment: Environment) -> Doctor.Check {
        let name = "request"
        let what = reason.isEmpty ? "\(status)" : "\(status) \(reason)"
        if case .none = signer {
            return .fail(name, "not signed: the credentials above could not be loaded", fix: "fix the credentials first")
        }
        if status == 400 && reason == "BadDeviceToken" || status == 200 {
            let by = if case .certificate = signer { "certificate" } else { "provider token" }
            return .pass(name, "APNs accepted the \(by) for \(topic ?? "the topic") and refused the all-zero device token (\(what)); nobody was notified")
        }
        let keyID: String = if case .token(_, let id, _) = signer { id } else { "" }
        let other = environment == .sandbox ? "production" : "sandbox"
        let fix: String = switch reason {
        case "InvalidProviderToken":
            "the key, key id and team id must belong together and the key must not be revoked (Certificates, Identifiers & Profiles > Keys); see the clock line too"
        case "ExpiredProviderToken":
            "the token's iat is over an hour old by APNs' clock: set this machine's clock right"
        case "BadEnvironmentKeyIdInToken":
            "key \(keyID) is restricted to \(other): send with --env \(other), or make a key for this environment (or for both) in Certificates, Identifiers & Profiles > Keys"
        case "TopicMismatch", "TopicDisallowed", "DeviceTokenNotForTopic", "BadTopic":
            "--topic \(topic ?? "") is not an app these credentials may push to: give the app's bundle id, or a key (certificate) for it"
        case "MissingTopic":
            "give --topic BUNDLE_ID"
        case "UnrelatedKeyIdInToken":
            "a connection is bound to its first key: this key is unrelated to it; retry on a fresh connection"
        case "BadCertificate", "BadCertificateEnvironment":
            "use an Apple Push Services certificate for this environment"
        default:
            "see Apple's table of APNs reasons for \(what)"
        }
        return .fail(name, "APNs answered \(what)", fix: fix)
    }

    // MARK: - Doing it

    private static func probe(_ setup: Doctor.Setup, endpoint: Endpoint, proxy: Proxy?, jwt: String?,
                              signer: Doctor.RequestSigner, topic: String?) -> capns_probe_result {
        var result = capns_probe_result()
        let identity: OpaquePointer? = if case .certificate(let c) = signer { c.handle } else { nil }
        let (s, atto) = setup.timeout.components
        // C copies that outlive the config's initializer (a String argument's pointer would not).
        var copies: [UnsafeMutablePointer<CChar>] = []
        defer { copies.forEach { free($0) } }
        func c(_ text: String?) -> UnsafePointer<CChar>? {
            guard let text, let copy = strdup(text) else { return nil }
            copies.append(copy)
            return UnsafePointer(copy)
        }
        var cfg = capns_probe_config(
            host: c(endpoint.host), port: UInt16(clamping: endpoint.port), ca_file: c(setup.caFile),
            proxy_host: c(proxy?.host), proxy_port: UInt16(clamping: proxy?.port ?? 0),
            proxy_username: c(proxy?.username), proxy_password: c(proxy?.password), identity: identity,
            path: c("/3/device/\(unissuedToken)"), jwt: c(jwt), topic: c(topic), push_type: c("alert"),
            body: c(#"{"aps":{"alert":"apns-send doctor"}}"#),
            timeout_ms: Int32(clamping: s * 1000 + atto / 1_000_000_000_000_000))
        _ = capns_probe(&cfg, &result)
        return result
    }

    /// A step's outcome: what it found, or why it failed (in words).
    enum Outcome<Value> {
        case success(Value)
        case failure(String)
    }

    private static func resolve(_ host: String) -> Outcome<[String]> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0 else { return .failure("cannot resolve: \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var p = list
        while let a = p {
            var buf = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(a.pointee.ai_addr, a.pointee.ai_addrlen, &buf, socklen_t(buf.count), nil, 0, NI_NUMERICHOST) == 0 {
                let text = String(cChars: buf)
                if !addresses.contains(text) { addresses.append(text) }
            }
            p = a.pointee.ai_next
        }
        return .success(addresses)
    }

    /// A TCP connect to the first address that answers, within `timeout`.
    private static func connect(_ endpoint: Endpoint, timeout: Duration) -> Outcome<Void> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard rc == 0 else { return .failure("cannot resolve \(endpoint.host): \(String(cString: gai_strerror(rc)))") }
        defer { freeaddrinfo(list) }
        var why = "no address"
        var p = list
        let ms = Int32(clamping: timeout.components.seconds * 1000)
        while let a = p {
            p = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_NONBLOCK.rawValue), a.pointee.ai_protocol)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return .success(()) }
            guard errno == EINPROGRESS else {
                why = String(cString: strerror(errno))
                continue
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&pfd, 1, ms) == 1 else {
                why = "no answer within \(ms / 1000) s"
                continue
            }
            var err: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)
            if err == 0 { return .success(()) }
            why = String(cString: strerror(err))
        }
        return .failure(why)
    }

    /// An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") in UNIX seconds.
    static func parseHTTPDate(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[5] == "GMT", let day = Int64(parts[1]), let year = Int64(parts[3]),
              let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int64($0) }
        guard time.count == 3 else { return nil }
        // Days from the civil date (Howard Hinnant's days_from_civil).
        let m = Int64(month) + 1
        let y = m <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return days * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]
    }

    private static func span(_ seconds: Int64) -> String {
        seconds >= 3600 ? "\(seconds / 3600) h \(seconds % 3600 / 60) min" : seconds >= 60 ? "\(seconds / 60) min \(seconds % 60) s" : "\(seconds) s"
    }

    private static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}
