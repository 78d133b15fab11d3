import APNs
import Glibc

/// `apns-send doctor [flags]`: checks the set-up the same flags, --config file and
/// environment would send with, and prints one ✓/✗ line per check (`Doctor`).
/// Exit 0 when every check passed, 1 when one failed, 2 for a usage error.
enum DoctorRun {
    static func main(_ arguments: [String], environment: (String) -> String? = Settings.getenv) -> Int32 {
        let options: Options
        do {
            options = try Options.parse(arguments)
        } catch {
            if Options.exitCode(for: error) == .success {
                print("usage: apns-send doctor --topic BUNDLE_ID [--key AuthKey_XXXX.p8 --key-id ID --team-id ID "
                      + "| --certificate FILE [--certificate-password-file FILE] | --config FILE] [--env sandbox|production] "
                      + "[--endpoint https://HOST:PORT] [--cacert CA.pem] [--proxy http://HOST:PORT]")
                return 0
            }
            Stderr.line(Options.message(for: error))
            return 2
        }
        let setup: Doctor.Setup
        do throws(UsageError) {
            setup = try self.setup(options, environment: environment)
        } catch {
            Stderr.line(error.message)
            return 2
        }
        let checks = Doctor.run(setup)
        for check in checks { print(check.line) }
        let failed = checks.filter { !$0.ok }.count
        print(failed == 0 ? "all \(checks.count) checks passed" : "\(failed) of \(checks.count) checks failed")
        return failed == 0 ? 0 : 1
    }

    /// The flags resolved as a send resolves them (flag > --config > environment),
    /// but nothing loaded: loading is what the doctor checks.
    static func setup(_ o: Options, environment: (String) -> String?) throws(UsageError) -> Doctor.Setup {
        if o.payload != nil || o.tokens != nil || o.messages != nil {
            throw UsageError("doctor sends nothing: give no PAYLOAD.json, TOKENS.txt or --messages")
        }
        let file = try o.config.map { path throws(UsageError) in try ConfigFile(path: path) }
        func setting(_ flag: String?, _ key: String) -> String? {
            [flag, file?[key], environment(key)].lazy.compactMap { $0 }.first { !$0.isEmpty }
        }
        let credentials: Doctor.Setup.Credentials
        switch try Settings.credentialKind(o, file: file, environment: environment) {
        case .token:
            guard let key = setting(o.key, "APNS_KEY_PATH"), let keyID = setting(o.keyID, "APNS_KEY_ID"),
                  let teamID = setting(o.teamID, "APNS_TEAM_ID") else {
                throw UsageError("no credentials: pass --key AuthKey_XXXX.p8 --key-id ID --team-id ID, or --certificate FILE (or a --config file)")
            }
            credentials = .token(keyPath: key, keyID: keyID, teamID: teamID)
        case .certificate:
            let path = setting(o.certificate, "APNS_CERTIFICATE_PATH")!
            var password: String?
            if let passwordFile = setting(o.certificatePasswordFile, "APNS_CERTIFICATE_PASSWORD_FILE") {
                do {
                    var text = try readSmallFile(passwordFile)[...]
                    if let newline = text.firstIndex(of: 0x0A) { text = text[..<newline] }
                    if text.last == 0x0D { text = text.dropLast() }
                    password = String(decoding: text, as: UTF8.self)
                } catch {
                    throw UsageError(passwordFile, error.reason)
                }
            }
            credentials = .certificate(path: path, password: password)
        }
        let endpoints = try Settings.endpoints(setting(o.env, "APNS_ENV"), o)
        let named = endpoints.environment
        var setup = Doctor.Setup(credentials: credentials, topic: setting(o.topic, "APNS_TOPIC"),
                                 environment: named, endpoint: endpoints[named], caFile: o.cacert)
        setup.proxy = try Settings.proxy(o.proxy.map { ("--proxy", $0) } ?? setting(nil, "APNS_PROXY").map { ("APNS_PROXY", $0) },
                                         environment: environment)
        if let timeout = o.timeout, timeout > 0 { setup.timeout = .milliseconds(Int64(timeout * 1000)) }
        return setup
    }
}
