import CAPNs
import Glibc

/// An HTTP forward proxy that connections to APNs go through, by HTTP CONNECT
/// (RFC 9110 §9.3.6): the proxy is asked for a tunnel to APNs' host and port, and TLS
/// runs end to end inside it, verified against APNs' name as always. The proxy sees
/// where we connect, never what we send.
///
/// A proxy that refuses the tunnel (407, 403, anything but 2xx) makes every request
/// to that endpoint end with status 0 and an error naming the proxy and its answer.
///
/// The library never reads the environment on its own: a caller that wants
/// `https_proxy` and `NO_PROXY` passes them to `fromEnvironment(_:)`. The password
/// never appears in a description, a mirror or an error.
public struct Proxy: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The proxy's host name or IP address.
    public var host: String
    /// The proxy's port.
    public var port: Int
    /// Basic credentials (RFC 7617), sent in `Proxy-Authorization`; nil for none.
    public var username: String?
    /// The Basic password; used only with `username`.
    public var password: String?
    /// Endpoints reached directly instead (`NO_PROXY`).
    public var bypass: NoProxy

    /// A proxy at `host` and `port`, taken as they are (`init(url:bypass:)` checks a URL).
    public init(host: String, port: Int, username: String? = nil, password: String? = nil, bypass: NoProxy = NoProxy()) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.bypass = bypass
    }

    /// `http://[user:password@]host:port[/]`; user and password percent-decoded. A URL
    /// without a scheme is taken as http://, as curl does; https:// and SOCKS proxies are
    /// refused (this client speaks HTTP CONNECT to a plain-HTTP proxy only).
    public init(url: String, bypass: NoProxy = NoProxy()) throws(Proxy.Error) {
        self = try ProxyURL.parse(url)
        self.bypass = bypass
    }

    /// The proxy the environment names for HTTPS (`https_proxy`, else `HTTPS_PROXY`, as
    /// curl reads them), with `no_proxy`/`NO_PROXY` as its bypass list; nil when none is
    /// set (an empty value counts as unset).
    public static func fromEnvironment(_ variable: (String) -> String?) throws(Proxy.Error) -> Proxy? {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap(variable).first { !$0.isEmpty }
        }
        guard let url = value("https_proxy", "HTTPS_PROXY") else { return nil }
        return try Proxy(url: url, bypass: NoProxy(value("no_proxy", "NO_PROXY") ?? ""))
    }

    /// The same, from a dictionary such as `ProcessInfo.processInfo.environment`.
    public static func fromEnvironment(_ variables: [String: String]) throws(Proxy.Error) -> Proxy? {
        try fromEnvironment { variables[$0] }
    }

    /// True when connections to `endpoint` go through this proxy (NO_PROXY does not name it).
    public func applies(to endpoint: Endpoint) -> Bool {
        !bypass.matches(host: endpoint.host, port: endpoint.port)
    }

    /// `http://user:***@host:port`: the password never shows.
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        let user = username.map { "\($0)\(password.map { $0.isEmpty ? "" : ":***" } ?? "")@" } ?? ""
        return "http://\(user)\(h):\(port)"
    }

    /// `Proxy(http://user:***@host:port)`: the password never shows.
    public var debugDescription: String { "Proxy(\(description))" }

    /// The URL without the password and the bypass list, so that `dump` and the
    /// debugger never show the password.
    public var customMirror: Mirror {
        Mirror(self, children: ["url": description, "bypass": bypass], displayStyle: .struct)
    }

    /// Why a proxy URL cannot be used.
    public enum Error: Swift.Error, Hashable, CustomStringConvertible {
        /// The text given (with any password hidden) and what is wrong with it.
        case invalidURL(String, String)

        /// One line quoting the URL (its password hidden) and what is wrong.
        public var description: String {
            switch self {
            case .invalidURL(let url, let why): "proxy '\(url)': \(why)"
            }
        }
    }
}

/// A `NO_PROXY` list, read as curl reads it: names separated by commas (or spaces);
/// `*` alone bypasses every host; a name matches that host and every host under it
/// (`example.com` and `.example.com` both match `api.example.com`); an IP address
/// matches itself, an IP with `/bits` its network; `host:port` matches that port only.
/// Case does not matter, nor a trailing dot.
public struct NoProxy: Sendable, Hashable, CustomStringConvertible {
    /// The list's entries, lower case, in the order given.
    public private(set) var entries: [String]

    /// Reads a `NO_PROXY` value; the empty list bypasses nothing.
    public init(_ list: String = "") {
        entries = list.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" })
            .map { $0.lowercased() }
    }

    /// The entries joined by commas.
    public var description: String { entries.joined(separator: ",") }

    /// True when connections to `host` on `port` bypass the proxy.
    public func matches(host: String, port: Int) -> Bool {

        let host = NoProxy.normalized(host)
        return entries.contains { entry in
            if entry == "*" { return true }
            let (name, entryPort) = NoProxy.split(entry)
            if let entryPort, entryPort != port { return false }
            if let slash = name.firstIndex(of: "/") {
                return IPNetwork(address: String(name[..<slash]), bits: Int(name[name.index(after: slash)...]))?
                    .contains(host) ?? false
            }
            let domain = NoProxy.normalized(name.hasPrefix(".") ? String(name.dropFirst()) : name)
            guard !domain.isEmpty else { return false }
            // An address matches itself only: "0.0.1" is no domain of 127.0.0.1.
            if IPNetwork.parse(host) != nil { return IPNetwork.parse(domain) == IPNetwork.parse(host) }
            return host == domain || host.hasSuffix("." + domain)
        }
    }

    /// Lower case, without brackets or a trailing dot.
    private static func normalized(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        if h.hasSuffix(".") { h.removeLast() }
        return h
    }

    /// "name:port" into its parts; a bare IPv6 address has colons but no port.
    private static func split(_ entry: String) -> (String, Int?) {
        if entry.hasPrefix("["), let close = entry.firstIndex(of: "]") {
            let rest = entry[entry.index(after: close)...]
            return (String(entry[...close]), rest.hasPrefix(":") ? Int(rest.dropFirst()) : nil)
        }
        let colons = entry.filter { $0 == ":" }.count
        if colons == 1, let colon = entry.firstIndex(of: ":"), let port = Int(entry[entry.index(after: colon)...]) {
            return (String(entry[..<colon]), port)
        }
        return (entry, nil)
    }
}

/// An IPv4 or IPv6 network, for NO_PROXY's CIDR entries.
private struct IPNetwork {
    let bytes: [UInt8]
    let bits: Int

    init?(address: String, bits: Int?) {
        guard let bytes = IPNetwork.parse(address), let bits, bits >= 0, bits <= bytes.count * 8 else { return nil }
        self.bytes = bytes
        self.bits = bits
    }

    func contains(_ host: String) -> Bool {
        guard let other = IPNetwork.parse(host), other.count == bytes.count else { return false }
        for i in 0..<bytes.count {
            let take = min(max(bits - i * 8, 0), 8)
            let mask: UInt8 = take == 0 ? 0 : ~UInt8(0) << (8 - take)
            if bytes[i] & mask != other[i] & mask { return false }
        }
        return true
    }

    static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}

/// The parser behind `Proxy(url:)`.
enum ProxyURL {
    static func parse(_ url: String) throws(Proxy.Error) -> Proxy {
        let shown = redacted(url)
        func fail(_ why: String) -> Proxy.Error { .invalidURL(shown, why) }

        if url.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
            throw fail("has a control character")
        }
        var rest = Substring(url)
        if let schemeEnd = rest.firstRange(of: "://") {
            let scheme = rest[..<schemeEnd.lowerBound].lowercased()
            switch scheme {
            case "http": break
            case "https": throw fail("https:// proxies are not supported; give the proxy as http://HOST:PORT (TLS to APNs still runs end to end through it)")
            case let s where s.hasPrefix("socks"): throw fail("SOCKS proxies are not supported; give an HTTP proxy as http://HOST:PORT")
            default: throw fail("unsupported scheme '\(scheme)' (expected http://HOST:PORT)")
            }
            rest = rest[schemeEnd.upperBound...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        if rest.contains(where: { "/?#".contains($0) }) {
            throw fail("a proxy URL has no path, query or fragment (expected http://HOST:PORT)")
        }

        var username: String?, password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userinfo.firstIndex(of: ":")
            let userPart = colon.map { userinfo[..<$0] } ?? userinfo
            let passwordPart = colon.map { userinfo[userinfo.index(after: $0)...] } ?? ""
            guard let user = decode(userPart), let pass = decode(passwordPart) else {
                throw fail("bad percent-encoding in the user name or password")
            }
            guard !user.isEmpty else { throw fail("empty user name") }
            if user.contains(":") { throw fail("the user name cannot contain ':' (Basic credentials)") }
            if (user + pass).unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f }) {
                throw fail("the user name or password has a control character")
            }
            username = user
            password = pass
        }

        let host: String, portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw fail("unclosed '[' in the host") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            guard IPNetwork.parse(host) != nil, host.contains(":") else { throw fail("'[\(host)]' is not an IPv6 address") }
            let after = rest[rest.index(after: close)...]
            guard after.hasPrefix(":") else { throw fail("no port (expected http://HOST:PORT)") }
            portText = after.dropFirst()
        } else {
            guard let colon = rest.lastIndex(of: ":") else { throw fail("no port (expected http://HOST:PORT)") }
            host = String(rest[..<colon])
            portText = rest[rest.index(after: colon)...]
            guard !host.isEmpty else { throw fail("no host (expected http://HOST:PORT)") }
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "." || $0 == "_") }) else {
                throw fail("'\(host)' is not a host name or IP address")
            }
        }
        guard let port = Int(portText), (1...65535).contains(port), portText.allSatisfy(\.isNumber) else {
            throw fail("port '\(portText)' is not 1 to 65535")
        }
        return Proxy(host: host, port: port, username: username, password: password)
    }

    /// The URL with the password replaced by *** and control characters escaped, for
    /// error lines.
    static func redacted(_ url: String) -> String {
        var shown = url
        if let at = url.lastIndex(of: "@") {
            let start = url.firstRange(of: "://").map(\.upperBound) ?? url.startIndex
            if start <= at, let colon = url[start..<at].firstIndex(of: ":") {
                shown = String(url[...colon]) + "***" + String(url[at...])
            }
        }
        return shown.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7f ? $0.escaped(asASCII: true) : String($0) }
            .joined()
    }

    /// Percent-decoding; nil for a malformed escape or bytes that are not UTF-8.
    private static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let c = utf8[i]
            if c == UInt8(ascii: "%") {
                let h = utf8.index(after: i)
                guard h < utf8.endIndex, utf8.index(after: h) < utf8.endIndex,
                      let hi = hex(utf8[h]), let lo = hex(utf8[utf8.index(after: h)]) else { return nil }
                bytes.append(hi << 4 | lo)
                i = utf8.index(h, offsetBy: 2)
            } else {
                bytes.append(c)
                i = utf8.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// The proxy fields of a C sender configuration, as C strings that live as long as
/// this value (capns_sender_create copies them).
final class ProxyCStrings {
    private var host, username, password: UnsafeMutablePointer<CChar>?
    private let port: UInt16

    /// `proxy` for connections to `endpoint`, unless its bypass list names the endpoint.
    init(_ proxy: Proxy?, for endpoint: Endpoint) {
        guard let proxy, proxy.applies(to: endpoint) else {
            port = 0
            return
        }
        host = strdup(proxy.host)
        username = proxy.username.flatMap { strdup($0) }
        password = proxy.password.flatMap { strdup($0) }
        port = UInt16(clamping: proxy.port)
    }

    func apply(to cfg: inout capns_sender_config) {
        cfg.proxy_host = UnsafePointer(host)
        cfg.proxy_port = port
        cfg.proxy_username = UnsafePointer(username)
        cfg.proxy_password = UnsafePointer(password)
    }

    deinit {
        free(host)
        free(username)
        if let password { memset(password, 0, strlen(password)) }
        free(password)
    }
}
