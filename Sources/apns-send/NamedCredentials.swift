import APNs
import Glibc

/// The credentials a run names, not yet loaded: token auth's key file, key id and
/// team id (any of them may be missing), or a certificate and its password file.
/// A send loads them (`load()`); the doctor hands them to its checks, which load
/// them one step at a time.
enum NamedCredentials {
    case token(keyPath: String?, keyID: String?, teamID: String?)
    case certificate(path: String, passwordFile: String?)

    /// Token or certificate auth, as the first source that names either decides
    /// (`kind`), with that kind's settings.
    init(_ o: Options, _ sources: SettingSources) throws(UsageError) {
        switch try NamedCredentials.kind(o, sources) {
        case .token:
            self = .token(o, sources)
        case .certificate:
            self = .certificate(path: sources.value(o.certificate, "APNS_CERTIFICATE_PATH")!,
                                passwordFile: sources.value(o.certificatePasswordFile, "APNS_CERTIFICATE_PASSWORD_FILE"))
        }
    }

    /// Token auth's settings, whatever else is named: a broadcast takes no certificate.
    static func token(_ o: Options, _ sources: SettingSources) -> NamedCredentials {
        .token(keyPath: sources.value(o.key, "APNS_KEY_PATH"), keyID: sources.value(o.keyID, "APNS_KEY_ID"),
               teamID: sources.value(o.teamID, "APNS_TEAM_ID"))
    }

    /// Loaded and checked now; the error names what is missing or wrong.
    func load() throws(UsageError) -> Credentials {
        switch self {
        case .token(let keyPath, let keyID, let teamID):
            try NamedCredentials.token(keyPath: keyPath, keyID: keyID, teamID: teamID)
        case .certificate(let path, let passwordFile):
            try NamedCredentials.certificate(path: path, passwordFile: passwordFile)
        }
    }

    private static func token(keyPath: String?, keyID: String?, teamID: String?) throws(UsageError) -> Credentials {
        guard let keyPath else {
            throw UsageError("no provider key: pass --key AuthKey_XXXX.p8 (or APNS_KEY_PATH in --config or the environment)")
        }
        guard let keyID else {
            throw UsageError("no key id: pass --key-id (or APNS_KEY_ID in --config or the environment)")
        }
        guard let teamID else {
            throw UsageError("no team id: pass --team-id (or APNS_TEAM_ID in --config or the environment)")
        }
        let key: SigningKey
        do { key = try SigningKey(contentsOf: keyPath) } catch { throw UsageError(error.description) }
        let credentials: Credentials
        do { credentials = try Credentials(key: key, keyID: keyID, teamID: teamID) } catch { throw UsageError(error.description) }
        warnIfOthersCanRead(keyPath)
        return credentials
    }

    private enum Kind { case token, certificate }

    /// Token or certificate: decided by the first source (flags, then --config, then
    /// the environment) that names either, and a source naming both is an error. So a
    /// `--certificate` on the command line wins over APNS_KEY_* in the environment.
    private static func kind(_ o: Options, _ sources: SettingSources) throws(UsageError) -> Kind {
        let flags = (token: [o.key, o.keyID, o.teamID].contains { $0 != nil },
                     certificate: o.certificate != nil, password: o.certificatePasswordFile != nil)
        if flags.token && (flags.certificate || flags.password) {
            throw UsageError("--certificate replaces --key, --key-id and --team-id (certificate or token auth, not both); give one or the other")
        }
        if flags.certificate { return .certificate }
        if flags.token { return .token }
        for source in ["--config \(o.config ?? "")", "the environment"] {
            func named(_ key: String) -> Bool {
                let value = source == "the environment" ? sources.environment(key) : sources.config?[key]
                return value.map { !$0.isEmpty } ?? false
            }
            let token = ["APNS_KEY_PATH", "APNS_KEY_ID", "APNS_TEAM_ID"].contains(where: named)
            let certificate = named("APNS_CERTIFICATE_PATH")
            if token && certificate {
                throw UsageError("\(source) names both APNS_CERTIFICATE_PATH and APNS_KEY_* (certificate or token auth, not both); keep one")
            }
            if certificate { return .certificate }
            if token { return .token }
        }
        if flags.password { throw UsageError("--certificate-password-file needs --certificate FILE.p12|FILE.pem") }
        return .token       // and its error says what is missing
    }

    /// The certificate and its key, loaded and checked now (password, dates, key
    /// against certificate): one line naming the file, never the password.
    private static func certificate(path: String, passwordFile: String?) throws(UsageError) -> Credentials {
        let password = try passwordFile.map { file throws(UsageError) in try NamedCredentials.password(file: file) }
        if let passwordFile { warnIfOthersCanRead(passwordFile) }
        let certificate: ClientCertificate
        do { certificate = try ClientCertificate(contentsOf: path, password: password) } catch { throw UsageError(error.description) }
        warnIfOthersCanRead(path)
        return .certificate(certificate)
    }

    /// The password file's first line, without its line break (LF or CRLF).
    static func password(file: String) throws(UsageError) -> String {
        var text: ArraySlice<UInt8>
        do { text = try readSmallFile(file)[...] } catch { throw UsageError(file, error.reason) }
        if let newline = text.firstIndex(of: 0x0A) { text = text[..<newline] }
        if text.last == 0x0D { text = text.dropLast() }
        return String(decoding: text, as: UTF8.self)
    }

    /// A provider key signs for the whole team: say so when the file is open to
    /// group or others, but go on (the key works, and the run may be wanted).
    private static func warnIfOthersCanRead(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return }
        let mode = String(info.st_mode & 0o777, radix: 8)
        Stderr.line("warning: \(path) is readable by group or others (mode \(mode)); chmod 600 it")
    }
}
