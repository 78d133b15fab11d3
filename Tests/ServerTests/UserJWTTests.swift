import Foundation
import Testing
import TestSupport

/// The user JWT beyond its signature and expiry: `aud` and `iss` when the config
/// names them (Supabase's tokens carry both), and the signature in canonical
/// base64url only.
@Suite struct UserJWTTests {
    static let issuer = "https://project.supabase.co/auth/v1"

    static func status(_ server: any APIServer, _ token: String) async -> Int {
        await server.request("GET", "/api/user/device-tokens", bearer: token).status
    }

    @Test func audienceAndIssuerAreRequiredWhenConfigured() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "user_jwt:\n  audience: authenticated\n  issuer: \(Self.issuer)"
        let server = InProcessServer(sandbox: nil, production: nil, options: options)
        try await server.start()
        defer { Task { await server.stop() } }
        let exp = Harness.inAnHour
        let cases: [(String, Int)] = [
            (#"{"sub":"ana","exp":\#(exp),"aud":"authenticated","iss":"\#(Self.issuer)"}"#, 200),
            (#"{"sub":"ana","exp":\#(exp),"aud":["other","authenticated"],"iss":"\#(Self.issuer)"}"#, 200),
            (#"{"sub":"ana","exp":\#(exp),"iss":"\#(Self.issuer)"}"#, 401),
            (#"{"sub":"ana","exp":\#(exp),"aud":"anon","iss":"\#(Self.issuer)"}"#, 401),
            (#"{"sub":"ana","exp":\#(exp),"aud":["anon"],"iss":"\#(Self.issuer)"}"#, 401),
            (#"{"sub":"ana","exp":\#(exp),"aud":"authenticated"}"#, 401),
            (#"{"sub":"ana","exp":\#(exp),"aud":"authenticated","iss":"https://other.supabase.co/auth/v1"}"#, 401),
            (#"{"sub":"ana","exp":\#(exp),"aud":"authenticated","iss":["\#(Self.issuer)"]}"#, 401),
        ]
        for (claims, expected) in cases {
            let r = await server.request("GET", "/api/user/device-tokens", bearer: Harness.signed(claims: claims))
            #expect(r.status == expected, "\(claims): \(r.body)")
            if expected == 401 { #expect(r.body == #"{"success":false,"error":"invalid token"}"#) }
        }
        // The harness's tokens say neither: refused here.
        #expect(await Self.status(server, Harness.jwt(sub: "ana")) == 401)
    }

    @Test func withoutTheSettingAudienceAndIssuerAreNotRead() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let claims = #"{"sub":"ana","exp":\#(Harness.inAnHour),"aud":"anything","iss":"anyone"}"#
        #expect(await Self.status(server, Harness.signed(claims: claims)) == 200)
        #expect(await Self.status(server, Harness.jwt(sub: "ana")) == 200)
    }

    @Test func anEmptyOrUnknownSettingIsAStartError() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        for (yaml, expected) in [("user_jwt:\n  audience: \"\"", "user_jwt.audience must not be empty"),
                                 ("user_jwt:\n  audiences: x", "unknown key user_jwt.audiences")] {
            let config = try ConfigTests.config(server, [("log_level: warning", "log_level: warning\n\(yaml)")])
            let r = await ConfigTests.run(["--config", config])
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(expected), "\(r.stderr)")
        }
    }

    /// A 32-byte signature is 43 characters, the last carrying 4 bits and 2 unused:
    /// the 3 spellings with an unused bit set decoded to the same bytes and verified.
    @Test func onlyTheCanonicalSpellingOfTheSignatureVerifies() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let token = Harness.jwt(sub: "ana")
        #expect(await Self.status(server, token) == 200)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let signature = token[token.index(after: token.lastIndex(of: ".")!)...]
        #expect(signature.count == 43)
        let last = alphabet.firstIndex(of: signature.last!)!
        #expect(last & 3 == 0, "canonical: the unused bits are zero")
        for unused in 1...3 {
            let alternate = String(token.dropLast()) + String(alphabet[last | unused])
            #expect(await Self.status(server, alternate) == 401, "\(alternate)")
        }
        // Padding, and a length no base64 has.
        #expect(await Self.status(server, token + "=") == 401)
        #expect(await Self.status(server, token + "A") == 401)
        #expect(await Self.status(server, token) == 200)
    }
}
