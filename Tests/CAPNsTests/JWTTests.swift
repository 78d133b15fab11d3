import CAPNs
import Foundation
import Testing
import TestSupport

/// ES256 provider tokens: key loading refuses what is not an APNs key, and a signed
/// token verifies with the openssl CLI, independently of jwt.c.
@Suite struct JWTTests {
    let dir: URL = {
        let d = FileManager.default.temporaryDirectory.appendingPathComponent("capns-jwt-\(UUID())")
        try? FileManager.default.createDirectory(at: d, withIntermediateDirectories: true)
        return d
    }()

    func loadError(_ path: String) -> String? {
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        guard let key = capns_key_load_file(path, &err, err.count) else { return text(err) }
        capns_key_free(key)
        return nil
    }

    func openssl(_ args: [String]) -> ProcessResult { runSync("/usr/bin/openssl", args) }

    @Test func keyLoadingRefusesWhatIsNotAnAPNsKey() throws {
        let missing = dir.appendingPathComponent("missing.p8").path
        #expect(loadError(missing)?.contains("cannot read key file \(missing)") == true)

        let garbage = dir.appendingPathComponent("garbage.p8")
        try Data("not a key at all\n".utf8).write(to: garbage)
        #expect(loadError(garbage.path)?.contains("not PEM") == true)

        let rsa = dir.appendingPathComponent("rsa.pem").path
        #expect(openssl(["genrsa", "-out", rsa, "2048"]).status == 0)
        #expect(loadError(rsa)?.contains("RSA") == true)

        let p384 = dir.appendingPathComponent("p384.pem").path
        #expect(openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384]).status == 0)
        #expect(loadError(p384)?.contains("secp384r1") == true)

        let cert = loadError(TestPKI.shared.serverCertificate)
        #expect(cert?.contains("not a private key") == true)
        #expect(cert?.contains("CERTIFICATE") == true)

        #expect(loadError(TestPKI.shared.keyPath) == nil)
    }

    @Test func errorsNeverCarryKeyMaterial() throws {
        // A P-384 key is refused; its base64 body must not appear in the message.
        let p384 = dir.appendingPathComponent("p384b.pem").path
        #expect(openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", p384]).status == 0)
        let pem = try String(contentsOfFile: p384, encoding: .utf8)
        let body = pem.split(separator: "\n").dropFirst().first.map(String.init) ?? "x"
        let message = loadError(p384) ?? ""
        #expect(!message.contains(body.prefix(16)))
    }

    @Test func aSignedTokenHasTheExactShapeAndVerifiesWithOpenSSL() throws {
        let pki = TestPKI.shared
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let key = try #require(capns_key_load_file(pki.keyPath, &err, err.count))
        defer { capns_key_free(key) }
        var out = [CChar](repeating: 0, count: Int(CAPNS_JWT_MAX))
        let n = capns_jwt_sign(key, pki.keyID, pki.teamID, 1_700_000_000, &out, out.count, &err, err.count)
        #expect(n > 0, "\(text(err))")
        let token = text(out)
        #expect(token.utf8.count == Int(n))

        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(parts.count == 3)
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        #expect(parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(alphabet.contains) })
        #expect(String(decoding: try base64url(parts[0]), as: UTF8.self) == #"{"alg":"ES256","kid":"\#(pki.keyID)"}"#)
        #expect(String(decoding: try base64url(parts[1]), as: UTF8.self) == #"{"iss":"\#(pki.teamID)","iat":1700000000}"#)
        let signature = try base64url(parts[2])
        #expect(signature.count == 64)

        #expect(verify(signingInput: parts[0] + "." + parts[1], rs: signature))
        // The same signature over other claims must not verify.
        let forged = base64urlEncode(Array(#"{"iss":"\#(pki.teamID)","iat":1700000001}"#.utf8))
        #expect(!verify(signingInput: parts[0] + "." + forged, rs: signature))
        var flipped = signature
        flipped[10] ^= 0x01
        #expect(!verify(signingInput: parts[0] + "." + parts[1], rs: flipped))
    }

    @Test func idsThatWouldBreakTheJSONAreRefused() throws {
        var err = [CChar](repeating: 0, count: Int(CAPNS_ERR_MAX))
        let key = try #require(capns_key_load_file(TestPKI.shared.keyPath, &err, err.count))
        defer { capns_key_free(key) }
        var out = [CChar](repeating: 0, count: Int(CAPNS_JWT_MAX))
        #expect(capns_jwt_sign(key, "KEY\"ID", "TEAM", 1, &out, out.count, &err, err.count) == -1)
        #expect(capns_jwt_sign(key, "KEYID", "TEAM", 1, &out, 100, &err, err.count) == -1)
    }

    /// openssl dgst -verify with the key's public half; the raw r||s becomes DER first.
    func verify(signingInput: String, rs: [UInt8]) -> Bool {
        let id = UUID().uuidString
        let pub = dir.appendingPathComponent("pub-\(id).pem").path
        let sig = dir.appendingPathComponent("sig-\(id).der")
        let input = dir.appendingPathComponent("input-\(id).txt")
        guard openssl(["pkey", "-in", TestPKI.shared.keyPath, "-pubout", "-out", pub]).status == 0,
              (try? Data(derSignature(rs)).write(to: sig)) != nil,
              (try? Data(signingInput.utf8).write(to: input)) != nil else { return false }
        let result = openssl(["dgst", "-sha256", "-verify", pub, "-signature", sig.path, input.path])
        return result.status == 0 && result.stdout.contains("Verified OK")
    }
}

/// ECDSA-Sig-Value ::= SEQUENCE { r INTEGER, s INTEGER } in DER, from raw r||s.
func derSignature(_ rs: [UInt8]) -> [UInt8] {
    func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var v = Array(bytes.drop { $0 == 0 })
        if v.isEmpty { v = [0] }
        if v[0] & 0x80 != 0 { v.insert(0, at: 0) }   // keep it positive
        return [0x02, UInt8(v.count)] + v
    }
    let body = integer(rs[0..<32]) + integer(rs[32..<64])
    return [0x30, UInt8(body.count)] + body
}

func base64urlEncode(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "=", with: "")
        .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
}

func base64url(_ s: String) throws -> [UInt8] {
    var b = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while b.count % 4 != 0 { b += "=" }
    guard let data = Data(base64Encoded: b) else { throw HarnessError(message: "bad base64url: \(s)") }
    return Array(data)
}
