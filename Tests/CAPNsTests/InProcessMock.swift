import CAPNs
import CAPNsMock
import Foundation
import TestSupport

/// The C mock APNs server on 127.0.0.1 (any free port), trusting TestPKI's provider key
/// and team for TestPKI's topic; `configure` sets its faults.
final class InProcessMock: @unchecked Sendable {
    let port: UInt16
    private let mock: OpaquePointer
    private var stopped = false

    init(unregistered: [String: Int64] = [:], configure: (inout capns_mock_config) -> Void = { _ in }) throws {
        let pki = TestPKI.shared
        var owned: [UnsafeMutablePointer<CChar>] = []
        defer { owned.forEach { free($0) } }
        func c(_ s: String) -> UnsafePointer<CChar> {
            let p = strdup(s)!
            owned.append(p)
            return UnsafePointer(p)
        }
        var key = capns_mock_auth_key()   // a team key for both environments: the rest stays zero
        key.key_id = c(pki.keyID)
        key.path = c(pki.keyPath)
        var keys = [key]
        var teams: [UnsafePointer<CChar>?] = [c(pki.teamID)]
        var topics: [UnsafePointer<CChar>?] = [c(pki.topic)]
        var cfg = capns_mock_config()
        cfg.cert_file = c(pki.serverCertificate)
        cfg.key_file = c(pki.serverKey)
        cfg.max_streams = 1000
        configure(&cfg)
        var err = [CChar](repeating: 0, count: Int(CAPNS_MOCK_ERR_MAX))
        let created = keys.withUnsafeMutableBufferPointer { k in
            teams.withUnsafeMutableBufferPointer { t in
                topics.withUnsafeMutableBufferPointer { p in
                    cfg.auth_keys = UnsafePointer(k.baseAddress)
                    cfg.n_auth_keys = 1
                    cfg.teams = UnsafePointer(t.baseAddress)
                    cfg.n_teams = 1
                    cfg.topics = UnsafePointer(p.baseAddress)
                    cfg.n_topics = 1
                    return capns_mock_create(&cfg, &err, err.count)
                }
            }
        }
        guard let created else { throw HarnessError(message: text(err)) }
        for (token, timestamp) in unregistered {
            _ = capns_mock_add_unregistered(created, token, timestamp)
        }
        guard capns_mock_start(created, &err, err.count) == 0 else {
            capns_mock_destroy(created)
            throw HarnessError(message: text(err))
        }
        mock = created
        port = capns_mock_port(created)
    }

    /// Stops the mock (joins its threads, off the pool) and returns its final statistics.
    func stop() async -> capns_mock_stats {
        guard !stopped else { return capns_mock_stats() }
        stopped = true
        return await offPool { [self] in
            var stats = capns_mock_stats()
            capns_mock_get_stats(mock, &stats)
            capns_mock_destroy(mock)
            return stats
        }
    }

    deinit { if !stopped { capns_mock_destroy(mock) } }

    /// The header names of every recorded request (record_cap > 0), in order; before stop().
    func recordedHeaderNames() -> [String] {
        (0..<capns_mock_record_count(mock)).flatMap { i -> [String] in
            guard let r = capns_mock_record_get(mock, i)?.pointee else { return [] }
            return (0..<r.n_headers).map { String(cString: r.headers[$0].name) }
        }
    }

    /// A fresh ES256 provider token for TestPKI's key and team.
    static func providerToken() throws -> String {
        let pki = TestPKI.shared
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        guard let key = capns_key_load_file(pki.keyPath, &err, err.count) else {
            throw HarnessError(message: text(err))
        }
        defer { capns_key_free(key) }
        var out = [CChar](repeating: 0, count: Int(CAPNS_JWT_MAX))
        let iat = Int64(Date().timeIntervalSince1970)
        guard capns_jwt_sign(key, pki.keyID, pki.teamID, iat, &out, out.count, &err, err.count) > 0 else {
            throw HarnessError(message: text(err))
        }
        return text(out)
    }
}

extension TestSender {
    /// A sender on `transport` to `mock`, with a real provider token for TestPKI's key.
    convenience init(_ transport: Transport = .nghttp2, mock: InProcessMock, maxOutstanding: Int32 = 1000) throws {
        try self.init(transport, port: mock.port, maxOutstanding: maxOutstanding, topic: TestPKI.shared.topic,
                      providerToken: try InProcessMock.providerToken())
    }
}
