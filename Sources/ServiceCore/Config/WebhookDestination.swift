import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a webhook may go. Events carry device tokens and user ids and the worker
/// sends them wherever the config points, from inside the operator's network: a
/// link-local address (169.254.0.0/16 with the clouds' metadata service at
/// 169.254.169.254, fe80::/10) or a metadata address is never a receiver, and a
/// private range (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) is one only
/// when `webhooks.allow_private_networks` says so. Loopback stays allowed: a
/// receiver on the same machine (a sidecar, the tests') is the operator's own.
///
/// An address in the URL is checked at load (a start, `--check-config`). A name
/// is checked before each attempt, on what it resolves to at that moment, so that
/// a name that points inside (or later does: DNS rebinding) is refused then and
/// the attempt fails; it is not resolved at load, which would make a start wait on
/// DNS. The HTTP client resolves the name once more as it connects, so a resolver
/// that answers differently within that instant is not caught.
package enum WebhookDestination {
    enum Kind: Equatable {
        case loopback, `public`
        /// Allowed with `allow_private_networks`.
        case `private`
        /// Never: link-local, metadata, unspecified, multicast, broadcast.
        case forbidden(String)
    }

    /// What an address (IPv4 or IPv6 text) is; nil when `text` is not an address.
    static func kind(ofAddress text: String) -> Kind? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return kind(v4: withUnsafeBytes(of: &v4) { Array($0) })
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return kind(v6: withUnsafeBytes(of: &v6) { Array($0) })
        }
        return nil
    }

    static func kind(v4 a: [UInt8]) -> Kind {
        switch (a[0], a[1]) {
        case (127, _): return .loopback
        case (169, 254): return .forbidden("link-local (169.254.0.0/16, the cloud metadata service's range)")
        case (100, 100) where a[2] == 100 && a[3] == 200: return .forbidden("a cloud metadata address")
        case (0, _): return .forbidden("not a unicast address")
        case (224...255, _): return .forbidden("not a unicast address")
        case (10, _), (172, 16...31), (192, 168), (100, 64...127): return .private
        default: return .public
        }
    }

    static func kind(v6 a: [UInt8]) -> Kind {
        if a[0..<10].allSatisfy({ $0 == 0 }) && a[10] == 0xff && a[11] == 0xff { return kind(v4: Array(a[12..<16])) }
        if a[0..<15].allSatisfy({ $0 == 0 }) {
            return a[15] == 1 ? .loopback : .forbidden("not a unicast address")
        }
        // fd00:ec2::254, the IPv6 metadata address, before fc00::/7 takes it.
        if a == [0xfd, 0x00, 0x0e, 0xc2] + Array(repeating: 0, count: 10) + [0x02, 0x54] {
            return .forbidden("a cloud metadata address")
        }
        if a[0] == 0xfe && a[1] & 0xc0 == 0x80 { return .forbidden("link-local (fe80::/10)") }
        if a[0] == 0xff { return .forbidden("not a unicast address") }
        if a[0] & 0xfe == 0xfc { return .private }
        return .public
    }

    /// Why a host may not be a receiver, or nil. `addresses`: what it resolved to
    /// (the host itself when it is an address).
    package static func refusal(host: String, addresses: [String], allowPrivate: Bool) -> String? {
        for address in addresses {
            switch kind(ofAddress: address) {
            case .forbidden(let why)?:
                return "\(host) is \(address == host ? "" : "at \(address), ")\(why): never a webhook receiver"
            case .private?:
                if !allowPrivate {
                    return "\(host) is \(address == host ? "" : "at \(address), ")in a private range; set webhooks.allow_private_networks: true to send there"
                }
            case .loopback?, .public?, nil:
                continue
            }
        }
        return nil
    }

    /// The host as an address when it is one (brackets of an IPv6 literal dropped).
    package static func literal(_ host: String) -> String? {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return kind(ofAddress: bare) == nil ? nil : bare
    }

    /// The addresses `host` resolves to now (itself when it is an address); nil
    /// when it does not resolve. Blocks: call it off the event loops.
    package static func resolve(_ host: String) -> [String]? {
        if let address = literal(host) { return [address] }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc) || canImport(Musl)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(first) }
        var addresses: [String] = []
        var next: UnsafeMutablePointer<addrinfo>? = first
        while let info = next {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if let sa = info.pointee.ai_addr,
               getnameinfo(sa, info.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0, NI_NUMERICHOST) == 0 {
                let text = String(cString: buffer)
                // A scoped IPv6 address ("fe80::1%eth0") is classified without its zone.
                let address = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
                if !addresses.contains(address) { addresses.append(address) }
            }
            next = info.pointee.ai_next
        }
        return addresses
    }

    /// Whether a host is this machine's own (loopback): plain http to it never
    /// crosses a network.
    static func isLoopback(_ host: String) -> Bool {
        if host.lowercased() == "localhost" { return true }
        return literal(host).flatMap { kind(ofAddress: $0) } == .loopback
    }

    /// A receiver's URL as logs and `GET /v1/webhook-events` show it: scheme, host,
    /// port and path. The user, password, query and fragment may carry a token.
    package static func redacted(_ url: String) -> String {
        if let c = URLComponents(string: url), let scheme = c.scheme, let host = c.host {
            let shownHost = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
            return "\(scheme)://\(shownHost)\(c.port.map { ":\($0)" } ?? "")\(c.percentEncodedPath)"
        }
        // Not a URL we can read: only what precedes any query, without a user part.
        var text = Substring(url)
        if let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = text[..<cut] }
        if let at = text.lastIndex(of: "@"), let start = text.range(of: "://")?.upperBound, at > start {
            text = text[..<start] + text[text.index(after: at)...]
        }
        return String(text)
    }
}
