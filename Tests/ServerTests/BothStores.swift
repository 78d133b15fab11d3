import APNsMock
import Foundation
import Testing
import TestSupport

/// Which store a server test runs its apns-server on: the same requests must get
/// the same answers from both.
enum ServerStore: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// One PostgreSQL cluster for a suite (`@Suite(.serverPostgres)`), stopped after its
/// last test; each server gets a new database on it.
struct ServerPostgresTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try await PostgresCluster.make()
        do {
            try await ServerPostgresTrait.$current.withValue(cluster) { try await function() }
        } catch {
            await cluster.stopOffPool()
            throw error
        }
        await cluster.stopOffPool()
    }

    @TaskLocal static var current: PostgresCluster?
}

extension Trait where Self == ServerPostgresTrait {
    static var serverPostgres: Self { Self() }
}

/// The application in process on `store` (PostgreSQL: a new database on the
/// suite's cluster, reached with sslmode=disable on loopback), stopped after `body`.
func withServer<T>(_ store: ServerStore, production: MockServer? = nil,
                   options: ServerProcess.Options = ServerProcess.Options(),
                   _ body: (InProcessServer) async throws -> T) async throws -> T {
    var options = options
    if store == .postgres {
        let cluster = try #require(ServerPostgresTrait.current, "the suite needs the .serverPostgres trait")
        options.database = try await cluster.newDatabase()
    }
    let server = InProcessServer(sandbox: nil, production: production, options: options)
    try await server.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

extension Harness {
    /// A JWT with exactly this header and these claims (JSON text as given), signed
    /// with the tests' secret by openssl.
    static func signed(claims: String, header: String = #"{"alg":"HS256","typ":"JWT"}"#,
                       secret: String = jwtSecret) -> String {
        let input = b64url(Data(header.utf8)) + "." + b64url(Data(claims.utf8))
        let hexKey = secret.utf8.map { String(format: "%02x", $0) }.joined()
        let r = runSync("/usr/bin/openssl", ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-hex"],
                        stdin: Data(input.utf8))
        precondition(r.status == 0, "openssl failed: \(r.stderr)")
        let hex = Array(r.stdout.split(separator: "=").last!.trimmingCharacters(in: .whitespacesAndNewlines).utf8)
        let mac = stride(from: 0, to: hex.count, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
        return input + "." + b64url(Data(mac))
    }

    /// An hour from now, as a JWT `exp`.
    static var inAnHour: Int { Int(Date().timeIntervalSince1970) + 3600 }
}
