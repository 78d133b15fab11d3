import Foundation
import Testing
import TestSupport
@testable import Service
@testable import ServiceHTTP

/// The small doors into the server: a token for trying the app routes by hand, a
/// config read from a pipe, and UNIX seconds spelled as the OpenAPI document allows.
@Suite struct FrontDoorTests {
    /// `apns-server user-jwt` prints a token the running server's app routes take,
    /// with the audience and issuer its config asks for.
    @Test func userJWTPrintsATokenTheServerAccepts() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "user_jwt:\n  audience: authenticated\n  issuer: https://auth.example.com/v1"
        try await withServer(.sqlite, options: options) { server in
            let r = await ConfigTests.run(["user-jwt", "--config", server.configPath, "--user", "by-hand", "--company", "acme",
                                           "--ttl", "600"])
            #expect(r.status == 0 && r.stderr.isEmpty, "\(r.status) \(r.stderr)")
            let token = r.stdout.trimmingCharacters(in: .newlines)
            let parts = token.split(separator: ".")
            try #require(r.stdout == token + "\n" && parts.count == 3, "\(r.stdout)")
            let claimsText = try #require(Base64URL.decode(parts[1]))
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(claimsText)) as? [String: Any])
            #expect(claims["sub"] as? String == "by-hand" && claims["company_id"] as? String == "acme")
            #expect(claims["aud"] as? String == "authenticated" && claims["iss"] as? String == "https://auth.example.com/v1")
            let exp = try #require(claims["exp"] as? Int), now = Int(Date().timeIntervalSince1970)
            #expect((now + 590...now + 601).contains(exp), "exp \(exp), now \(now)")

            let accepted = await server.request("GET", "/api/user/push-preferences", bearer: token)
            #expect(accepted.status == 200, "\(accepted.body)")
            // The tests' own token without the audience is refused: the check is real.
            let plain = await server.request("GET", "/api/user/push-preferences", bearer: Harness.jwt(sub: "by-hand"))
            #expect(plain.status == 401, "\(plain.body)")

            for (arguments, expected) in [(["--ttl", "0"], "--ttl must be 1 to 86400 seconds"),
                                          (["--ttl", "86401"], "--ttl must be 1 to 86400 seconds"),
                                          (["--company", ""], "--company must be 1 to 256 characters")] {
                let bad = await ConfigTests.run(["user-jwt", "--config", server.configPath, "--user", "u"] + arguments)
                #expect(bad.status == 2 && bad.stdout.isEmpty && bad.stderr.contains(expected), "\(arguments): \(bad.stderr)")
            }
            let noConfig = await ConfigTests.run(["user-jwt", "--user", "u"])
            #expect(noConfig.status == 2 && noConfig.stderr.contains("--config FILE.yaml is required"), "\(noConfig.stderr)")
        }
    }

    /// `--check-config --config <(…)`: a readable pipe is read like a file.
    @Test func aConfigFromAPipeIsReadLikeAFile() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        // A config read from a pipe has no folder of its own: its paths are absolute.
        let path = try ConfigTests.config(server, [
            ("database: sqlite:var/apns.db", "database: sqlite:\(server.scratch.path("piped.db"))"),
            ("api_keys_file: api-keys", "api_keys_file: \(server.scratch.path("api-keys"))"),
            ("user_jwt_secret_file: user-jwt.secret", "user_jwt_secret_file: \(server.scratch.path("user-jwt.secret"))"),
        ])
        let fromFile = await ConfigTests.run(["--check-config", "--config", path])
        let env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("APNS_") }
        let fromPipe = await TestSupport.run("/bin/bash", ["-c", #"exec "$0" --check-config --config <(cat "$1")"#,
                                                           Harness.binary, path], environment: env, timeout: 30)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(fromPipe.status == fromFile.status && !fromPipe.stderr.contains("cannot read"), "\(fromPipe.stderr)")
        // And a secret from a pipe.
        let secret = await TestSupport.run("/bin/bash", ["-c", #"APNS_SERVER_USER_JWT_SECRET_FILE=<(cat "$2") exec "$0" --check-config --config "$1""#,
                                                         Harness.binary, path, server.scratch.path("user-jwt.secret")],
                                           environment: env, timeout: 30)
        #expect(secret.status == 0, "\(secret.stderr)")
    }

    /// `UnixSeconds` is JSON Schema's integer: 1282.0 is one, 1282.5 is not.
    @Test func unixSecondsTakeAnyWholeNumber() async throws {
        try await withServer(.sqlite) { server in
            func post(_ expiration: String) async -> HTTPResponse {
                await server.backend("POST", "/v1/notifications",
                                     #"{"type":"order_status_changed","app_type":"staff","user_ids":["nobody"],"alert":"a","expiration":\#(expiration)}"#)
            }
            for whole in ["1282", "1282.0", "1.282e3", "0.0"] {
                let r = await post(whole)
                #expect(r.status == 202, "\(whole): \(r.body)")
            }
            for bad in ["1282.5", "-1", "1e300", "9.3e18"] {
                let r = await post(bad)
                #expect(r.status == 400 && r.body.contains("expiration must be a UNIX time in seconds"), "\(bad): \(r.body)")
            }
        }
    }
}
