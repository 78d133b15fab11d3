import CAPNs

/// An Apple Push Services certificate with its private key, for certificate-based
/// trust: a PKCS#12 (.p12) file, or a PEM file holding the certificate and its key.
/// Loaded and checked once (password, dates, key against certificate), held by
/// OpenSSL; the key and the password never leave C and no error quotes them.
public final class ClientCertificate: Sendable {
    // Immutable after load and reference counted in C; every sender retains it.
    nonisolated(unsafe) let handle: OpaquePointer

    /// Why a certificate file cannot be used; `description` is one line naming the file.
    public struct LoadError: Swift.Error, Equatable, CustomStringConvertible {
        /// What is wrong with the file, for a caller that acts on it.
        public enum Kind: Sendable, Equatable {
            /// The file cannot be opened or read.
            case unreadable
            /// Neither PKCS#12 nor PEM with a certificate and its private key.
            case malformed
            /// A wrong password, or none for an encrypted file.
            case badPassword
            /// The certificate's notAfter has passed.
            case expired
            /// The certificate's notBefore is still ahead.
            case notYetValid
            /// The private key is not the certificate's.
            case keyMismatch
        }

        /// What is wrong, as a case.
        public let kind: Kind
        /// What is wrong, in one line naming the file.
        public let description: String

    }

    /// Topics this certificate lets a provider send to: its subject UID (the bundle
    /// id), UID.voip, UID.complication, and those listed in Apple's topic extension.
    public let topics: [String]
    /// The subject UID, the bundle id (nil when the subject has none).
    public let bundleID: String?
    /// Marked for the development (sandbox) environment (1.2.840.113635.100.6.3.1).
    public let isForSandbox: Bool
    /// Marked for the production environment (1.2.840.113635.100.6.3.2).
    public let isForProduction: Bool
    /// When it expires, UNIX seconds.
    public let notAfter: Int64

    /// `password` is the file's password, nil for none.
    public init(contentsOf path: String, password: String? = nil) throws(LoadError) {
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        var why: Int32 = 0
        let loaded = withOptionalCString(password) { capns_identity_load_file(path, $0, &why, &err, err.count) }
        guard let loaded else {
            throw LoadError(kind: LoadError.Kind(why), description: String(cChars: err))
        }
        handle = loaded
        let uid = String(cString: capns_identity_uid(loaded))
        bundleID = uid.isEmpty ? nil : uid
        topics = (0..<capns_identity_topic_count(loaded)).map { String(cString: capns_identity_topic(loaded, $0)) }
        let environments = capns_identity_environments(loaded)
        isForSandbox = environments & CAPNS_IDENTITY_SANDBOX != 0
        isForProduction = environments & CAPNS_IDENTITY_PRODUCTION != 0
        notAfter = capns_identity_not_after(loaded)
    }

    deinit { capns_identity_release(handle) }
}

extension ClientCertificate.LoadError.Kind {
    init(_ why: Int32) {
        switch capns_identity_error(rawValue: UInt32(bitPattern: why)) {
        case CAPNS_IDENTITY_UNREADABLE: self = .unreadable
        case CAPNS_IDENTITY_BAD_PASSWORD: self = .badPassword
        case CAPNS_IDENTITY_EXPIRED: self = .expired
        case CAPNS_IDENTITY_NOT_YET_VALID: self = .notYetValid
        case CAPNS_IDENTITY_KEY_MISMATCH: self = .keyMismatch
        default: self = .malformed
        }
    }
}
