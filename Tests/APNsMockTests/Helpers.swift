import APNsMock
import Foundation
import TestSupport

/// What the tests share: a mock on the test PKI, provider tokens signed with the
/// openssl CLI (independent of our C), and HTTP/2 requests made by curl.
enum Fixture {
    static let pki = TestPKI.shared
    static let token = String(repeating: "ab", count: 32)
    static let otherToken = String(repeating: "cd", count: 32)
    static let payload = Data(#"{"aps":{"alert":"hello"}}"#.utf8)
    /// Signed once per test process; valid for the hour the tests take.
    static let goodJWT = jwt()

    static func mock(_ tweak: (inout MockConfiguration) -> Void = { _ in }) throws -> MockServer {
        var c = MockConfiguration(certificatePath: pki.serverCertificate, privateKeyPath: pki.serverKey,
                                  authKeys: [pki.keyID: pki.keyPath], teamIDs: [pki.teamID], topics: [pki.topic])
        tweak(&c)
        return try MockServer(c)
    }

    /// A provider JWT: ES256 over header.claims by `openssl dgst`, DER turned into raw r||s.
    static func jwt(keyPath: String = pki.keyPath, keyID: String = pki.keyID, teamID: String = pki.teamID,
                    iat: Int = Int(Date().timeIntervalSince1970)) -> String {
        let header = base64url(Data(#"{"alg":"ES256","kid":"\#(keyID)"}"#.utf8))
        let claims = base64url(Data(#"{"iss":"\#(teamID)","iat":\#(iat)}"#.utf8))
        let signed = "\(header).\(claims)"
        // runSync hands back text; the signature is binary, so it goes through a file.
        let tmp = FileManager.default.temporaryDirectory.appendingPathComponent("sig-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: tmp) }
        let s = runSync("/usr/bin/openssl", ["dgst", "-sha256", "-sign", keyPath, "-out", tmp.path],
                        stdin: Data(signed.utf8))
        precondition(s.status == 0, "openssl dgst failed: \(s.stderr)")
        let der = [UInt8](try! Data(contentsOf: tmp))
        return "\(signed).\(base64url(Data(rawSignature(der))))"
    }

    /// DER ECDSA-Sig-Value (SEQUENCE { INTEGER r, INTEGER s }) to 64 bytes r||s.
    static func rawSignature(_ der: [UInt8]) -> [UInt8] {
        func integer(at i: Int) -> ([UInt8], Int) {
            let n = Int(der[i + 1])
            var v = Array(der[(i + 2)..<(i + 2 + n)])
            while v.count > 32 && v.first == 0 { v.removeFirst() }
            return (Array(repeating: 0, count: 32 - v.count) + v, i + 2 + n)
        }
        let (r, next) = integer(at: 2)
        let (s, _) = integer(at: next)
        return r + s
    }

    static func base64url(_ d: Data) -> String {
        d.base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// One answer as curl saw it.
struct Answer {
    var status: Int
    var headers: [String: String]
    var body: String
    var reason: String? { json?["reason"] as? String }
    var json: [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
    }
}

/// One request to the mock. Headers default to a valid alert with a good token.
struct Request {
    var method = "POST"
    var path = "/3/device/\(Fixture.token)"
    var headers: [String] = [
        "authorization: bearer \(Fixture.goodJWT)",
        "apns-topic: \(Fixture.pki.topic)",
        "apns-push-type: alert",
    ]
    var body: Data? = Fixture.payload

    /// Replaces (or with nil removes) a header.
    func with(_ name: String, _ value: String?) -> Request {
        var r = self
        r.headers.removeAll { $0.lowercased().hasPrefix(name + ":") }
        if let value { r.headers.append("\(name): \(value)") }
        return r
    }
}

/// Runs curl once for all requests (one HTTP/2 connection, reused), returning
/// each answer in order, and curl's exit status.
func curl(_ port: UInt16, _ requests: [Request], extra: [String] = []) -> (answers: [Answer], status: Int32) {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("curl-\(UUID().uuidString)")
    try! FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    var args: [String] = []
    for (i, r) in requests.enumerated() {
        if i > 0 { args.append("--next") }
        args += ["-sS", "-i", "--http2", "--cacert", Fixture.pki.caFile, "-X", r.method] + extra
        for h in r.headers { args += ["-H", h] }
        if let body = r.body {
            let file = dir.appendingPathComponent("body\(i)")
            try! body.write(to: file)
            args += ["--data-binary", "@\(file.path)", "-H", "content-type:"]
        }
        args.append("https://127.0.0.1:\(port)\(r.path)")
    }
    let result = runSync("/usr/bin/curl", args, timeout: 30)
    return (parseAnswers(result.stdout), result.status)
}

func curl(_ port: UInt16, _ request: Request = Request()) -> Answer {
    let (answers, _) = curl(port, [request])
    return answers.first ?? Answer(status: 0, headers: [:], body: "")
}

/// curl -i output: "HTTP/2 NNN", headers, a blank line, the body; repeated.
private func parseAnswers(_ text: String) -> [Answer] {
    var answers: [Answer] = []
    let parts = text.components(separatedBy: "HTTP/2 ").dropFirst()
    for part in parts {
        let sections = part.components(separatedBy: "\r\n\r\n")
        let head = sections[0].components(separatedBy: "\r\n")
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...]
                .trimmingCharacters(in: .whitespaces)
        }
        let status = Int(head[0].split(separator: " ").first ?? "") ?? 0
        answers.append(Answer(status: status, headers: headers,
                              body: sections.dropFirst().joined(separator: "\r\n\r\n")))
    }
    return answers
}
