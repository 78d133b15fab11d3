import CAPNs
import Glibc

/// Checks a set-up before its first send, the way a support thread would: the
/// credentials' files, the clock, DNS, TCP, the proxy, TLS with the chain it
/// verified, and one authenticated request that proves the credentials without
/// notifying anyone (to a well-formed token APNs never issued, which it refuses
/// with 400 BadDeviceToken once it has accepted the credentials).
///
/// Each check is one line with what it found and, when it failed, what to do.
/// No check ever prints a key, a password or a provider token.
///
/// ```swift
/// let checks = Doctor.run(.init(credentials: .token(keyPath: p8, keyID: kid, teamID: team), topic: "com.example.app"))
/// for check in checks { print(check.line) }
/// ```
///
/// Blocks (DNS, connects, one request): call it from a thread that may wait.
public enum Doctor {
    /// What to check.
    public struct Setup: Sendable {
        /// The credentials as files and ids, loaded by the checks themselves so that a
        /// bad file is a failed check rather than an error before any check.
        public enum Credentials: Sendable {
            /// A .p8 provider key, its key id and team id, as given (checked here, not before).
            case token(keyPath: String, keyID: String, teamID: String)
            /// An Apple Push Services certificate (.p12 or PEM) and its password, if any.
            case certificate(path: String, password: String?)
        }

        /// What the request is signed with.
        public var credentials: Credentials
        /// The bundle id; certificate auth defaults to the certificate's UID.
        public var topic: String?
        /// The environment the credentials are for: `.production` or `.sandbox`.
        public var environment: Environment
        /// Where its requests go instead of Apple's host (a mock); nil: Apple's.
        public var endpoint: Endpoint?
        /// Hosts whose names are looked up: Apple's two, or the endpoint's host.
        public var lookups: [String] {
            endpoint.map { [$0.host] } ?? [Environment.production.host, Environment.sandbox.host]
        }
        /// Where the request goes.
        var target: Endpoint { endpoint ?? Endpoint(host: environment.host, port: environment.port) }
        /// A CA (PEM) trusted on top of the system's.
        public var caFile: String?
        /// The HTTP proxy to connect through; nil connects directly.
        public var proxy: Proxy?
        /// The request's whole deadline.
        public var timeout: Duration = .seconds(10)

        /// A set-up to check; the timeout is set on the value afterwards.
        public init(credentials: Credentials, topic: String?, environment: Environment = .production,
                    endpoint: Endpoint? = nil, caFile: String? = nil, proxy: Proxy? = nil) {
            self.credentials = credentials
            self.topic = topic
            self.environment = environment
            self.endpoint = endpoint
            self.caFile = caFile
            self.proxy = proxy
        }
    }

    /// One line of the report.
    public struct Check: Sendable, Equatable {
        /// What was checked: "key file", "clock", "TLS", ...
        public let name: String
        /// True when the check passed.
        public let ok: Bool

        /// What was found.
        public let detail: String
        /// What to do; nil when it passed.
        public let fix: String?

        static func pass(_ name: String, _ detail: String) -> Check {
            Check(name: name, ok: true, detail: detail, fix: nil)
        }

        static func fail(_ name: String, _ detail: String, fix: String) -> Check {
            Check(name: name, ok: false, detail: detail, fix: fix)
        }

        /// "✓ name: detail", or "✗ name: detail. Fix: ...".
        public var line: String {
            ok ? "✓ \(name): \(detail)" : "✗ \(name): \(detail). Fix: \(fix ?? "see above")"
        }
    }

    /// Every check, in the order a connection meets them.
    public static func run(_ setup: Setup, now: () -> Int64 = { Int64(time(nil)) }) -> [Check] {
        var checks: [Check] = []
        let signer: RequestSigner
        switch setup.credentials {
        case .token(let keyPath, let keyID, let teamID):
            let (found, key) = CredentialChecks.token(keyPath: keyPath, keyID: keyID, teamID: teamID)
            checks += found
            signer = key.map { .token($0, keyID: keyID, teamID: teamID) } ?? .none
        case .certificate(let path, let password):
            let (found, certificate) = CredentialChecks.certificate(path: path, password: password, topic: setup.topic,
                                                                    environment: setup.environment, now: now())
            checks += found
            signer = certificate.map { .certificate($0) } ?? .none
        }
        checks += ConnectionChecks.lookups(setup.lookups)
        checks += ConnectionChecks.run(setup, signer: signer, now: now)
        return checks
    }

    /// What the request is signed with; `.none` when the credentials could not be loaded
    /// (the request then goes without, and only the connection is checked).
    enum RequestSigner {
        case token(SigningKey, keyID: String, teamID: String)
        case certificate(ClientCertificate)
        case none
    }
}
