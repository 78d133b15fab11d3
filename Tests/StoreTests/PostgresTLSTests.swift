import Foundation
import Testing
import TestSupport
@testable import Store

/// TLS to PostgreSQL: without `sslmode` in the URL a server that offers no TLS is
/// refused (never plain text by surprise); `sslmode=disable` is how a loopback test
/// cluster is reached in clear; `verify-full` with `sslrootcert` pins the CA, and a
/// server whose certificate another CA signed is refused. Each cluster is its own.
@Suite struct PostgresTLSTests {
    static let pki = TestPKI.shared

    /// `postgres://apns@127.0.0.1:PORT/DB?connect_timeout=60` plus `query` (the test
    /// cluster's own URL says sslmode=disable: here each test says what it means). The
    /// timeout is the test cluster's: a TLS handshake under the whole suite's load can
    /// take longer than the default's 10 s, and a timeout is not what these tests check.
    static func url(_ cluster: PostgresCluster, _ database: String, _ query: String) -> String {
        let parameters = ["connect_timeout=60"] + (query.isEmpty ? [] : [String(query.dropFirst())])
        return "postgres://\(cluster.user)@127.0.0.1:\(cluster.port)/\(database)?\(parameters.joined(separator: "&"))"
    }

    /// Expects `url` to migrate, and shows the error when it does not.
    static func expectConnects(_ url: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let error = try await migrateError(url)
        #expect(error == nil, "\(url): \(error ?? "")", sourceLocation: sourceLocation)
    }

    static func database(_ cluster: PostgresCluster) async throws -> String {
        let url = try await cluster.newDatabase()
        return String(url[url.index(after: url.lastIndex(of: "/")!)...].prefix { $0 != "?" })
    }

    static func migrateError(_ url: String) async throws -> String? {
        let store = try PostgresStore(url: url)
        defer { Task { await store.close() } }
        do {
            try await store.migrate()
            return nil
        } catch {
            return error.description
        }
    }

    @Test func theDefaultRefusesAServerWithoutTLSAndDisableConnects() async throws {
        let cluster = try await PostgresCluster.make()
        defer { cluster.stop() }
        let db = try await Self.database(cluster)
        let refused = try await Self.migrateError(Self.url(cluster, db, ""))
        #expect(refused == "migrate: PostgreSQL at 127.0.0.1:\(cluster.port) does not offer TLS (sslmode=require; sslmode=disable in the URL connects without it)")
        try await Self.expectConnects(Self.url(cluster, db, "?sslmode=disable"))
    }

    @Test func verifyFullWithTheClusterCAConnectsAndAnotherCAIsRefused() async throws {
        let cluster = try await PostgresCluster.make(tls: .init(certificate: Self.pki.serverCertificate, key: Self.pki.serverKey))
        defer { cluster.stop() }
        let db = try await Self.database(cluster)
        // The default, require: TLS, no CA given, so no certificate check (libpq's).
        try await Self.expectConnects(Self.url(cluster, db, ""))
        // The test CA signed the server's certificate for 127.0.0.1.
        try await Self.expectConnects(Self.url(cluster, db, "?sslmode=verify-full&sslrootcert=\(Self.pki.caFile)"))
        try await Self.expectConnects(Self.url(cluster, db, "?sslmode=verify-ca&sslrootcert=\(Self.pki.caFile)"))

        // A CA of its own, which signed nothing the server has.
        let scratch = Scratch()
        let other = scratch.path("other-ca.pem")
        let made = runSync("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                                "-nodes", "-days", "1", "-subj", "/CN=another CA",
                                                "-keyout", scratch.path("other-ca.key"), "-out", other])
        #expect(made.status == 0, "\(made.stderr)")
        for mode in ["verify-full", "verify-ca", "require"] {
            let refused = try await Self.migrateError(Self.url(cluster, db, "?sslmode=\(mode)&sslrootcert=\(other)"))
            #expect(refused == "migrate: cannot reach PostgreSQL at 127.0.0.1:\(cluster.port): TLS: the server's certificate is not signed by a trusted CA (see sslrootcert)",
                    "\(mode): \(refused ?? "connected")")
        }

        // A CA file that is not one fails before any connection.
        let notPEM = scratch.file("not-a-ca.pem", "hello\n")
        #expect(throws: StoreError.self) {
            _ = try PostgresStore(url: Self.url(cluster, db, "?sslmode=verify-full&sslrootcert=\(notPEM)"))
        }
    }
}
