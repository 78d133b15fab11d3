import APNs
import APNsMock

/// Where the notifications go: a mock in this process, or one already running on loopback.
struct Target: Sendable {
    let environment: Environment
    let caFile: String
    /// The in-process mock, when there is one.
    let mock: MockServer?

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    init(endpoint: String?, cacert: String?, keys: KeyMaterial, mockLatencyMS: Int) throws {
        caFile = cacert ?? keys.caFile
        guard let endpoint else {
            var c = MockConfiguration(certificatePath: keys.serverCertificate, privateKeyPath: keys.serverKey,
                                      authKeys: [keys.keyID: keys.providerKey], teamIDs: [keys.teamID],
                                      topics: [keys.topic])
            c.latency = .milliseconds(mockLatencyMS)
            let mock = try MockServer(c)
            self.mock = mock
            environment = .custom(host: "127.0.0.1", port: Int(mock.port))
            return
        }
        mock = nil
        environment = try Target.loopback(endpoint)
    }

    func stop() { mock?.stop() }

    /// https://HOST:PORT where HOST is loopback: a benchmark never loads anything else.
    private static func loopback(_ endpoint: String) throws -> Environment {
        var rest = Substring(endpoint)
        guard rest.hasPrefix("https://") else { throw Failure(description: "--endpoint: expected https://HOST:PORT") }
        rest = rest.dropFirst("https://".count)
        while rest.hasSuffix("/") { rest = rest.dropLast() }
        guard let colon = rest.lastIndex(of: ":"), let port = Int(rest[rest.index(after: colon)...]),
              (1...65535).contains(port) else {
            throw Failure(description: "--endpoint: expected https://HOST:PORT")
        }
        let host = String(rest[..<colon])
        guard ["127.0.0.1", "localhost", "[::1]"].contains(host) else {
            throw Failure(description: "--endpoint: \(host) is not loopback; apns-bench only loads 127.0.0.1")
        }
        return .custom(host: host == "[::1]" ? "::1" : host, port: port)
    }
}
