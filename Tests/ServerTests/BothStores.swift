import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// Which store a server test runs its apns-server on: the same requests must get
/// the same answers from both.
enum ServerStore: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }
}

/// The PostgreSQL cluster a suite's servers make their databases on
/// (`@Suite(.serverPostgres)`): the test process's one (`PostgresCluster.shared()`),
/// stopped when the process ends; each server gets a new database on it.
struct ServerPostgresTrait: SuiteTrait, TestScoping {
    var isRecursive: Bool { false }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        let cluster = try await PostgresCluster.shared()
        try await ServerPostgresTrait.$current.withValue(cluster) { try await function() }
    }

    @TaskLocal static var current: PostgresCluster?

    /// A new database on the suite's cluster at the current schema (a copy of a
    /// template migrated once for the run): the server's own migration at start-up
    /// finds nothing to do. Tests of the migration itself take `newDatabase()`.
    static func newDatabase() async throws -> String {
        let cluster = try #require(current, "the suite needs the .serverPostgres trait")
        return try await cluster.newDatabase(template: "migrated") { url in
            let store = try PostgresStore(url: url)
            try await store.migrate()
            await store.close()
        }
    }
}

extension Trait where Self == ServerPostgresTrait {
    static var serverPostgres: Self { Self() }
}

/// The application in process on `store` (PostgreSQL: a new database on the
/// suite's cluster, reached with sslmode=disable on loopback), stopped after `body`.
func withServer<T>(_ store: ServerStore, sandbox: MockServer? = nil, production: MockServer? = nil,
                   options: ServerProcess.Options = ServerProcess.Options(),
                   _ body: (InProcessServer) async throws -> T) async throws -> T {
    var options = options
    if store == .postgres {
        options.database = try await ServerPostgresTrait.newDatabase()
    }
    let server = InProcessServer(sandbox: sandbox, production: production, options: options)
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
    /// with the tests' secret.
    static func signed(claims: String, header: String = #"{"alg":"HS256","typ":"JWT"}"#,
                       secret: String = jwtSecret) -> String {
        let input = b64url(Data(header.utf8)) + "." + b64url(Data(claims.utf8))
        return input + "." + hs256(input, secret: secret)
    }

    /// An hour from now, as a JWT `exp`.
    static var inAnHour: Int { Int(Date().timeIntervalSince1970) + 3600 }
}
