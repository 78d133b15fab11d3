import CAPNs

/// How the engine proves who it is to APNs: one or the other, never both.
public enum Credentials: Sendable {
    /// Token-based trust: an ES256 provider token (JWT) signed with the .p8 key Apple
    /// issued, sent in every request's authorization header.
    case token(Token)
    /// Certificate-based trust: the TLS client certificate (Apple Push Services)
    /// identifies the app; no authorization header is sent.
    case certificate(ClientCertificate)

    /// The .p8 key, its key id and the team id.
    public struct Token: Sendable {
        /// The .p8 key that signs the provider tokens.
        public let key: SigningKey
        /// The key's 10-character Key ID, the JWT's `kid`.
        public let keyID: String
        /// The 10-character Team ID the key belongs to, the JWT's `iss`.
        public let teamID: String

        /// Checks that both ids are 10 letters or digits, as Apple issues them.
        public init(key: SigningKey, keyID: String, teamID: String) throws(Credentials.Error) {
            guard Token.isAppleID(keyID) else { throw .badKeyID(keyID) }
            guard Token.isAppleID(teamID) else { throw .badTeamID(teamID) }
            self.key = key
            self.keyID = keyID
            self.teamID = teamID
        }

        private static func isAppleID(_ s: String) -> Bool {
            s.utf8.count == 10 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
        }
    }

    /// Why an id cannot be Apple's.
    public enum Error: Swift.Error, Equatable, CustomStringConvertible {
        /// The key id given is not 10 letters or digits.
        case badKeyID(String)
        /// The team id given is not 10 letters or digits.
        case badTeamID(String)

        /// One line naming the id and where Apple shows the right one.
        public var description: String {
            switch self {
            case .badKeyID(let id): "key id '\(id)' is not 10 letters or digits (Apple's Key ID, from Certificates, Identifiers & Profiles > Keys)"
            case .badTeamID(let id): "team id '\(id)' is not 10 letters or digits (your Team ID, from the Apple Developer account's Membership page)"
            }
        }
    }

    /// Token-based credentials.
    public init(key: SigningKey, keyID: String, teamID: String) throws(Credentials.Error) {
        self = .token(try Token(key: key, keyID: keyID, teamID: teamID))
    }
}

/// An APNs .p8 key: a PKCS#8 PEM EC P-256 private key, held by OpenSSL.
/// The key bytes never leave C; errors never quote them.
public final class SigningKey: Sendable {
    // Immutable after load; OpenSSL signs with one EVP_PKEY from several threads safely.
    nonisolated(unsafe) let handle: OpaquePointer

    /// Why a key cannot be loaded or cannot sign; never quotes the key.
    public struct LoadError: Swift.Error, Equatable, CustomStringConvertible {
        /// What failed, in one line.
        public let description: String
    }

    /// Loads the .p8 file at `path` (`AuthKey_<key id>.p8`, as Apple's download names it).
    public init(contentsOf path: String) throws(LoadError) {
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        guard let key = capns_key_load_file(path, &err, err.count) else {
            throw LoadError(description: String(cChars: err))
        }
        handle = key
    }

    /// Loads a key from its PEM text (`-----BEGIN PRIVATE KEY-----` ...), e.g. from a
    /// secret store rather than a file.
    public init(pem: String) throws(LoadError) {

        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let key = pem.utf8CString.withUnsafeBufferPointer {
            capns_key_load_pem($0.baseAddress, $0.count - 1, &err, err.count)
        }
        guard let key else { throw LoadError(description: String(cChars: err)) }
        handle = key
    }

    deinit { capns_key_free(handle) }

    /// A provider JWT issued at `issuedAt` (UNIX seconds).
    func sign(keyID: String, teamID: String, issuedAt: Int64) throws(LoadError) -> String {
        var out = [CChar](repeating: 0, count: Int(CAPNS_JWT_MAX))
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        guard capns_jwt_sign(handle, keyID, teamID, issuedAt, &out, out.count, &err, err.count) >= 0 else {
            throw LoadError(description: "cannot sign a provider token: \(String(cChars: err))")
        }
        return String(cChars: out)
    }
}
