/// `--endpoint https://HOST:PORT`: where to connect instead of Apple's host.
/// Only the scheme, a host (an IPv6 address in brackets) and a port: APNs'
/// paths are fixed, so anything more is a mistake worth stopping for.
enum EndpointURL {
    static func parse(_ text: String) -> (host: String, port: Int)? {
        guard text.hasPrefix("https://") else { return nil }
        var rest = Substring(text.dropFirst("https://".count))
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        let host: Substring, portText: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]"), rest[rest.index(after: close)...].hasPrefix(":") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            portText = rest[rest.index(close, offsetBy: 2)...]
        } else {
            guard let colon = rest.lastIndex(of: ":") else { return nil }
            host = rest[..<colon]
            guard !host.contains(":") else { return nil }   // IPv6 needs its brackets
            portText = rest[rest.index(after: colon)...]
        }
        guard !host.isEmpty, !host.contains(where: { "/@?#[] ".contains($0) }),
              !portText.isEmpty, portText.allSatisfy(\.isASCII), portText.allSatisfy(\.isNumber),
              portText.count <= 5, let port = Int(portText), (1...65535).contains(port)
        else { return nil }
        return (String(host), port)
    }
}
