import APNs
import Glibc

/// `apns-send doctor [flags]`: checks the set-up the same flags, --config file and
/// environment would send with, and prints one ✓/✗ line per check (`Doctor`).
/// Exit 0 when every check passed, 1 when one failed, 2 for a usage error.
enum DoctorRun {
    static func main(_ arguments: [String], environment: @escaping (String) -> String? = Settings.getenv) -> Int32 {
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
    static func setup(_ o: Options, environment: @escaping (String) -> String?) throws(UsageError) -> Doctor.Setup {
        if o.payload != nil || o.tokens != nil || o.messages != nil {
            throw UsageError("doctor sends nothing: give no PAYLOAD.json, TOKENS.txt or --messages")
        }
        let sources = try SettingSources(o, environment: environment)
        let credentials: Doctor.Setup.Credentials
        switch try NamedCredentials(o, sources) {
        case .token(let keyPath?, let keyID?, let teamID?):
            credentials = .token(keyPath: keyPath, keyID: keyID, teamID: teamID)
        case .token:
            throw UsageError("no credentials: pass --key AuthKey_XXXX.p8 --key-id ID --team-id ID, or --certificate FILE (or a --config file)")
        case .certificate(let path, let passwordFile):
            let password = try passwordFile.map { file throws(UsageError) in try NamedCredentials.password(file: file) }
            credentials = .certificate(path: path, password: password)
        }
        let endpoints = try Settings.endpoints(o, sources)
        let named = endpoints.environment
        var setup = Doctor.Setup(credentials: credentials, topic: sources.value(o.topic, "APNS_TOPIC"),
                                 environment: named, endpoint: endpoints[named], caFile: o.cacert)
        setup.proxy = try Settings.proxy(o, sources)
        if let timeout = o.timeout, timeout > 0 { setup.timeout = .milliseconds(Int64(timeout * 1000)) }
        return setup
    }
}
