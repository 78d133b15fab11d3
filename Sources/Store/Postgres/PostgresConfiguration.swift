import Foundation
import PostgresNIO

extension PostgresStore {
    /// Where the database is, read from the service's `database:` URL:
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]`.
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
        /// Connections in this instance's pool (the worker and the HTTP routes share it).
        public var maximumConnections: Int

        /// `prefer` (the default, as libpq's) uses TLS when the server offers it, with the
        /// certificate verified; `require` refuses a server without TLS; `disable` never asks.
        public enum TLSMode: String, Sendable {
            case disable, prefer, require
        }

        public init(host: String, port: Int = 5432, user: String, password: String? = nil, database: String,
                    tls: TLSMode = .prefer, maximumConnections: Int = 10) {
            self.host = host
            self.port = port
            self.user = user
            self.password = password
            self.database = database
            self.tls = tls
            self.maximumConnections = maximumConnections
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

            var tls = TLSMode.prefer
            for pair in query.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, parts[0] == "sslmode" else {
                    throw StoreError("database URL: unknown parameter \"\(parts[0])\" (only sslmode is read)")
                }
                guard let mode = TLSMode(rawValue: parts[1]) else {
                    throw StoreError("database URL: sslmode must be disable, prefer or require, not \"\(parts[1])\"")
                }
                tls = mode
            }
            self.init(host: String(host), port: port, user: user, password: password, database: database, tls: tls)
        }

        /// `USER@HOST:PORT/DATABASE`: what logs and errors may say.
        public var description: String { "\(user)@\(endpoint)/\(database)" }

        /// `HOST:PORT`.
        public var endpoint: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

        var client: PostgresClient.Configuration {
            var config = PostgresClient.Configuration(host: host, port: port, username: user, password: password,
                                                      database: database, tls: clientTLS)
            config.options.maximumConnections = maximumConnections
            config.options.connectTimeout = .seconds(5)
            return config
        }

        /// A single connection's settings (migrations and LISTEN use their own).
        func connection() throws(StoreError) -> PostgresConnection.Configuration {
            let tls: PostgresConnection.Configuration.TLS
            do {
                switch self.tls {
                case .disable: tls = .disable
                case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                }
            } catch {
                throw StoreError("cannot set up TLS for PostgreSQL at \(endpoint): \(error)")
            }
            var config = PostgresConnection.Configuration(host: host, port: port, username: user, password: password,
                                                          database: database, tls: tls)
            config.options.connectTimeout = .seconds(5)
            return config
        }

        private var clientTLS: PostgresClient.Configuration.TLS {
            switch tls {
            case .disable: .disable
            case .prefer: .prefer(.makeClientConfiguration())
            case .require: .require(.makeClientConfiguration())
            }
        }
    }
}
