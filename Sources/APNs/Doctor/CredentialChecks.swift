import CAPNs
import Glibc

/// The credentials' own checks, before anything is sent: the .p8 key file (its
/// format, who may read it, the key id its name carries), the ids' form, or a
/// certificate's dates, environment and topics.
enum CredentialChecks {
    static func token(keyPath: String, keyID: String, teamID: String) -> ([Doctor.Check], SigningKey?) {
        var checks: [Doctor.Check] = []
        var key: SigningKey?
        do {
            key = try SigningKey(contentsOf: keyPath)
            checks.append(.pass("key file", "\(keyPath) is an EC P-256 private key (PKCS#8)"))
        } catch {
            checks.append(.fail("key file", "\(keyPath): \(error.description)",
                                fix: "give the AuthKey_<KEY ID>.p8 file downloaded from Certificates, Identifiers & Profiles > Keys, unchanged"))
        }
        var st = stat()
        if stat(keyPath, &st) == 0 {
            let mode = String(st.st_mode & 0o777, radix: 8)
            if st.st_mode & 0o077 != 0 {
                checks.append(.fail("key permissions", "\(keyPath) has mode \(mode): other users may read the key",
                                    fix: "chmod 600 \(keyPath)"))
            } else {
                checks.append(.pass("key permissions", "mode \(mode), readable by its owner only"))
            }
        }
        let named = nameKeyID(keyPath)
        if !isAppleID(keyID) {
            checks.append(.fail("key id", "'\(keyID)' is not 10 letters or digits",
                                fix: "give the Key ID shown beside the key in Certificates, Identifiers & Profiles > Keys"))
        } else if let named, named != keyID {
            checks.append(.fail("key id", "\(keyID), but the file is named for key \(named)",
                                fix: "give the key id the file was issued with (--key-id \(named)), or the file of key \(keyID)"))
        } else {
            checks.append(.pass("key id", keyID + (named == nil ? "" : ", as the file's name says")))
        }
        if isAppleID(teamID) {
            checks.append(.pass("team id", teamID))
        } else {
            checks.append(.fail("team id", "'\(teamID)' is not 10 letters or digits",
                                fix: "give the Team ID from the Apple Developer account's Membership page"))
        }
        return (checks, key)
    }

    static func certificate(path: String, password: String?, topic: String?, environment: Environment,
                            now: Int64) -> ([Doctor.Check], ClientCertificate?) {
        let certificate: ClientCertificate
        do {
            certificate = try ClientCertificate(contentsOf: path, password: password)
        } catch {
            let fix = switch error.kind {
            case .badPassword: "give the file's password with --certificate-password-file"
            case .expired, .notYetValid: "make a new Apple Push Services certificate in Certificates, Identifiers & Profiles"
            case .keyMismatch: "export the certificate together with its own private key (a .p12 from Keychain Access)"
            case .unreadable, .malformed: "give a .p12, or a PEM holding the certificate and its private key"
            }
            return ([.fail("certificate", error.description, fix: fix)], nil)
        }
        var checks: [Doctor.Check] = []
        let days = (certificate.notAfter - now) / 86_400
        checks.append(.pass("certificate", "\(path) for \(certificate.bundleID ?? "(no UID)"), expires in \(days) day(s)"))
        let wanted = topic ?? certificate.bundleID ?? ""
        if certificate.topics.contains(wanted) {
            checks.append(.pass("certificate topic", "\(wanted) is among its topics (subject UID \(certificate.bundleID ?? "none"))"))
        } else {
            checks.append(.fail("certificate topic", "\(wanted.isEmpty ? "no topic" : wanted) is not among its topics \(certificate.topics)",
                                fix: "give --topic \(certificate.bundleID ?? "BUNDLE_ID"), or the certificate of that app"))
        }
        let needsSandbox = environment == .sandbox
        if needsSandbox ? certificate.isForSandbox : certificate.isForProduction {
            checks.append(.pass("certificate environment", "marked for \(needsSandbox ? "sandbox" : "production")"))
        } else {
            checks.append(.fail("certificate environment", "not marked for \(needsSandbox ? "sandbox" : "production")",
                                fix: "use --env \(needsSandbox ? "production" : "sandbox"), or a certificate for this environment"))
        }
        return (checks, certificate)
    }

    /// "AuthKey_ABC123DEFG.p8" -> "ABC123DEFG".
    private static func nameKeyID(_ path: String) -> String? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = String(name.dropFirst("AuthKey_".count).dropLast(".p8".count))
        return isAppleID(id) ? id : nil
    }

    static func isAppleID(_ s: String) -> Bool {
        s.utf8.count == 10 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
    }
}
