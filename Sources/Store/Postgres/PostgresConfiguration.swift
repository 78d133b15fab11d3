import Foundation
import PostgresNIO

extension PostgresStore {
    /// Where the database is, read from the service's `database:` URL:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=MODE][&sslrootcert=CA.pem][&connect_timeout=SECONDS]`.
    ///
    /// The password is kept for the connection and appears nowhere else: `description`
    /// and every error name the database as `USER@HOST:PORT/DATABASE`.
    public struct Configuration: Sendable, CustomStringConvertible {
        public var host: String
        public var port: Int
        public var user: String
        public var password: String?
        public var database: String
        public var tls: TLSMode
        /// `sslrootcert`: the CA (PEM) the server's certificate must chain to, in place
        /// of the system's roots; with it, `require` verifies the chain too (as libpq).
        public var caFile: String?
        /// Connections in this instance's pool (the worker and the HTTP routes share it).
        public var maximumConnections: Int
        /// `connect_timeout`: how long one connection may take to be ready, TCP, TLS and
        /// sign-in together. libpq waits forever without it; ten seconds here, so that a
        /// start against a host that drops packets ends in its one line, while a busy
        /// server (each connection is a process it forks) still has time to answer.
        public var connectTimeout: Duration
        public static let defaultConnectTimeout = Duration.seconds(10)

        /// libpq's `sslmode`s, less the two that fall back to plain text on their own
        /// (`allow`, `prefer`): a connection is in clear only where the URL says `disable`.
        /// `require` (the default) refuses a server without TLS but, like libpq, checks no
        /// certificate unless `sslrootcert` names a CA (it stops a listener, not an
        /// impostor); `verify-ca` checks the chain; `verify-full` the chain and that the
        /// certificate names the host (or the IP address connected to).
        public enum TLSMode: String, Sendable, CaseIterable {
            case disable, require
            case verifyCA = "verify-ca"
            case verifyFull = "verify-full"
        }

        public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String,
                    tls: TLSMode = .require, caFile: String? = nil, maximumConnections: Int = 10,
                    connectTimeout: Duration = defaultConnectTimeout) {
            self.host = host
            self.port = port
            self.user = user
            self.password = password
            self.database = database
            self.tls = tls
            self.caFile = caFile
            self.maximumConnections = maximumConnections
            self.connectTimeout = connectTimeout
        }

        /// Parses the URL; each mistake is one line that never quotes the password.
        public init(url: String) throws(StoreError) {
            let shape = "expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"
            var rest = Substring(url)
            guard let scheme = ["postgres://", "postgresql://"].first(where: { rest.hasPrefix($0) }) else {
                throw StoreError("database URL: \(shape)")
            }
            rest = rest.dropFirst(scheme.count)
            // The credentials end at the last "@" (a password may contain one, percent-encoded or not).
            guard let at = rest.lastIndex(of: "@") else {
                throw StoreError("database URL: no user (\(shape))")
            }
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let (rawUser, rawPassword): (Substring, Substring?) =
                if let colon = credentials.firstIndex(of: ":") {
                    (credentials[..<colon], credentials[credentials.index(after: colon)...])
                } else {
                    (credentials, nil)
                }
            guard let user = rawUser.removingPercentEncoding, !user.isEmpty else {
                throw StoreError("database URL: no user (\(shape))")
            }
            var password: String?
            if let rawPassword {
                guard let decoded = rawPassword.removingPercentEncoding else {
                    throw StoreError("database URL: the password is not valid percent-encoding")
                }
                password = decoded
            }

            var query: Substring = ""
            if let mark = rest.firstIndex(of: "?") {
                query = rest[rest.index(after: mark)...]
                rest = rest[..<mark]
            }
            guard let slash = rest.firstIndex(of: "/") else {
                throw StoreError("database URL: no database name (\(shape))")
            }
            let hostPort = rest[..<slash]
            guard let database = rest[rest.index(after: slash)...].removingPercentEncoding, !database.isEmpty,
                  !database.contains("/") else {
                throw StoreError("database URL: no database name (\(shape))")
            }
            var host = hostPort, port = 5432
            if let colon = hostPort.lastIndex(of: ":"), !hostPort.hasSuffix("]") {
                host = hostPort[..<colon]
                let digits = hostPort[hostPort.index(after: colon)...]
                guard let number = Int(digits), (1...65535).contains(number) else {
                    throw StoreError("database URL: bad port \"\(digits)\"")
                }
                port = number
            }
            if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            guard !host.isEmpty else { throw StoreError("database URL: no host (\(shape))") }

            var tls = TLSMode.require
            var caFile: String?
            var connectTimeout = Self.defaultConnectTimeout
            for pair in query.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                switch (parts[0], parts.count == 2 ? parts[1].removingPercentEncoding : nil) {
                case ("sslmode", let value?):
                    guard let mode = TLSMode(rawValue: value) else {
                        let modes = TLSMode.allCases.map(\.rawValue).joined(separator: ", ")
                        throw StoreError("database URL: sslmode must be one of \(modes), not \"\(value)\"")
                    }
                    tls = mode
                case ("sslrootcert", let value?) where !value.isEmpty:
                    caFile = value
                case ("connect_timeout", let value?):
                    // Whole seconds, as libpq writes it; its 0 (wait forever) is refused:
                    // a service that waits forever at start says nothing about why.
                    guard let seconds = Int(value), (1...3600).contains(seconds) else {
                        throw StoreError("database URL: connect_timeout must be whole seconds from 1 to 3600, not \"\(value)\"")
                    }
                    connectTimeout = .seconds(seconds)
                case ("sslmode", nil), ("sslrootcert", _), ("connect_timeout", nil):
                    throw StoreError("database URL: \(parts[0]) needs a value")
                default:
                    throw StoreError("database URL: unknown parameter \"\(parts[0])\" (only sslmode, sslrootcert and connect_timeout are read)")
                }
            }
            if caFile != nil, tls == .disable {
                throw StoreError("database URL: sslrootcert is for TLS, and sslmode=disable turns it off")
            }
            self.init(host: String(host), port: port, user: user, password: password, database: database, tls: tls,
                      caFile: caFile, connectTimeout: connectTimeout)
        }

        /// `USER@HOST:PORT/DATABASE`: what logs and errors may say.
        public var description: String { "\(user)@\(endpoint)/\(database)" }

        /// `HOST:PORT`.
        public var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        var client: PostgresClient.Configuration {
            let tls: PostgresClient.Configuration.TLS = tlsSettings.map { .require($0) } ?? .disable
            var config = PostgresClient.Configuration(host: host, port: port, username: user, password: password,
                                                      database: database, tls: tls)
            config.options.maximumConnections = maximumConnections
            config.options.connectTimeout = connectTimeout
            return config
        }

        /// A single connection's settings (migrations and LISTEN use their own).
        func connection() throws(StoreError) -> PostgresConnection.Configuration {
            let tls: PostgresConnection.Configuration.TLS = try tlsContext().map { .require($0) } ?? .disable
            var config = PostgresConnection.Configuration(host: host, port: port, username: user, password: password,
                                                          database: database, tls: tls)
            config.options.connectTimeout = TimeAmount(connectTimeout)
            return config
        }

        /// Whether TLS can be set up as asked (the `sslrootcert` file read): the service
        /// calls it at start, so a bad CA file is its one error line, not a failure at
        /// the first connection.
        public func checkTLS() throws(StoreError) {
            _ = try tlsContext()
        }

        private func tlsContext() throws(StoreError) -> NIOSSLContext? {
            guard let settings = tlsSettings else { return nil }
            do {
                return try NIOSSLContext(configuration: settings)
            } catch {
                let what = caFile.map { "the CA file (sslrootcert) \($0)" } ?? "the system's CA certificates"
                throw StoreError("cannot set up TLS for PostgreSQL at \(endpoint): cannot load \(what): \(error)")
            }
        }

        /// The TLS the `sslmode` asks for; nil for `disable`.
        private var tlsSettings: TLSConfiguration? {
            guard tls != .disable else { return nil }
            var settings = TLSConfiguration.makeClientConfiguration()
            if let caFile { settings.trustRoots = .file(caFile) }
            settings.certificateVerification = switch tls {
            case .disable, .verifyFull: .fullVerification
            case .verifyCA: .noHostnameVerification
            case .require: caFile == nil ? .none : .noHostnameVerification
            }
            return settings
        }
    }
}
