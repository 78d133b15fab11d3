import Foundation
import Testing
import TestSupport

/// The app-facing endpoints, byte for byte the seed's contract (SEED-BACKENDS.md).
@Suite struct AppAPITests {
    static let hexToken = Harness.tokens(1, seed: 7)[0]

    /// The seed's calls, as curl commands a developer would type, with the seed's bodies.
    @Test func seedCurlCommands() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let base = "http://127.0.0.1:\(server.port)"
        let jwt = Harness.jwt(sub: "user-1", companyID: "company-1")
        let token = Self.hexToken

        var r = await curl(["-X", "POST", "\(base)/api/user/device-token",
                            "-H", "Authorization: Bearer \(jwt)", "-H", "Content-Type: application/json",
                            "-d", #"{"deviceToken":"\#(token)","platform":"ios","appType":"staff","deviceName":"iPhone 15 Pro","osVersion":"17.4","appVersion":"1.0.0"}"#])
        #expect(r.status == 200)
        #expect(r.body == #"{"success":true,"message":"Device token registered successfully"}"#)

        r = await curl(["\(base)/api/user/device-tokens", "-H", "Authorization: Bearer \(jwt)"])
        #expect(r.status == 200)
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(r.body.utf8)) as? [String: Any])
        let tokens = try #require(listed["tokens"] as? [[String: Any]])
        #expect(tokens.count == 1)
        #expect(r.body.hasPrefix(#"{"success":true,"tokens":[{"id":"#))
        #expect(r.body.contains(#","platform":"ios","app_type":"staff","device_name":"iPhone 15 Pro","os_version":"17.4","app_version":"1.0.0","last_used_at":"#))
        let created = try #require(tokens[0]["created_at"] as? String)
        #expect(created.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil)

        r = await curl(["\(base)/api/user/push-preferences", "-H", "Authorization: Bearer \(jwt)"])
        #expect(r.status == 200)
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"orderStatusChanged":true,"orderCreated":true,"orderCollected":true,"deviceStatusChanged":true,"quoteApproved":true,"quoteRejected":true,"paymentReceived":true,"newEnquiry":true,"enquiryReply":true}}"#)

        r = await curl(["-X", "PUT", "\(base)/api/user/push-preferences", "-H", "Authorization: Bearer \(jwt)",
                        "-H", "Content-Type: application/json", "-d", #"{"newEnquiry":false}"#])
        #expect(r.status == 200)
        #expect(r.body == #"{"success":true,"message":"Push preferences updated successfully"}"#)

        r = await curl(["\(base)/api/user/push-preferences", "-H", "Authorization: Bearer \(jwt)"])
        #expect(r.body == #"{"success":true,"preferences":{"notificationsEnabled":true,"orderStatusChanged":true,"orderCreated":true,"orderCollected":true,"deviceStatusChanged":true,"quoteApproved":true,"quoteRejected":true,"paymentReceived":true,"newEnquiry":false,"enquiryReply":true}}"#)

        r = await curl(["-X", "DELETE", "\(base)/api/user/device-token", "-H", "Authorization: Bearer \(jwt)",
                        "-H", "Content-Type: application/json", "-d", #"{"deviceToken":"\#(token)"}"#])
        #expect(r.status == 200)
        #expect(r.body == #"{"success":true,"message":"Device token unregistered successfully"}"#)

        r = await curl(["\(base)/api/user/device-tokens", "-H", "Authorization: Bearer \(jwt)"])
        #expect(r.body == #"{"success":true,"tokens":[]}"#)

        // Unregistering again: not one of this user's active tokens.
        r = await curl(["-X", "DELETE", "\(base)/api/user/device-token", "-H", "Authorization: Bearer \(jwt)",
                        "-H", "Content-Type: application/json", "-d", #"{"deviceToken":"\#(token)"}"#])
        #expect(r.status == 404)
        #expect(r.body == #"{"success":false,"error":"device token not found"}"#)
    }

    @Test func registrationIsAnUpsertStoredLowerCase() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let jwt = Harness.jwt(sub: "u-upsert")
        let token = Self.hexToken
        for (name, hex) in [("First", token.uppercased()), ("Second", token)] {
            let r = await server.request("POST", "/api/user/device-token",
                                         body: #"{"deviceToken":"\#(hex)","platform":"ios","appType":"staff","deviceName":"\#(name)"}"#, bearer: jwt)
            #expect(r.status == 200, "\(r.body)")
        }
        let r = await server.request("GET", "/api/user/device-tokens", bearer: jwt)
        let tokens = r.json["tokens"] as? [[String: Any]] ?? []
        #expect(tokens.count == 1, "re-registering updates, never duplicates")
        #expect(tokens.first?["device_name"] as? String == "Second")
        #expect(tokens.first?["os_version"] is NSNull)
        // Stored lower-case: the lower-case spelling unregisters it.
        let d = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(token)"}"#, bearer: jwt)
        #expect(d.status == 200)
    }

    /// A user sees and changes only their own tokens and preferences.
    @Test func usersAreIsolated() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let alice = Harness.jwt(sub: "alice"), bob = Harness.jwt(sub: "bob")
        let token = Self.hexToken
        _ = await server.request("POST", "/api/user/device-token",
                                 body: #"{"deviceToken":"\#(token)","platform":"ios","appType":"staff"}"#, bearer: alice)
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: bob).body == #"{"success":true,"tokens":[]}"#)
        let d = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(token)"}"#, bearer: bob)
        #expect(d.status == 404, "bob cannot unregister alice's token")
        #expect((await server.request("GET", "/api/user/device-tokens", bearer: alice).json["tokens"] as? [Any])?.count == 1)

        _ = await server.request("PUT", "/api/user/push-preferences", body: #"{"notificationsEnabled":false}"#, bearer: bob)
        let a = await server.request("GET", "/api/user/push-preferences", bearer: alice)
        #expect((a.json["preferences"] as? [String: Any])?["notificationsEnabled"] as? Bool == true)
        let b = await server.request("GET", "/api/user/push-preferences", bearer: bob)
        #expect((b.json["preferences"] as? [String: Any])?["notificationsEnabled"] as? Bool == false)
    }

    /// Which app the seed's preference calls mean: ?appType, else the latest registration's, else the first.
    @Test func preferencesPickTheApp() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let jwt = Harness.jwt(sub: "carol")
        let customerKeys = #"{"success":true,"preferences":{"notificationsEnabled":true,"orderStatusChanged":true,"quoteApproved":true}}"#
        #expect(await server.request("GET", "/api/user/push-preferences?appType=customer", bearer: jwt).body == customerKeys)
        _ = await server.request("POST", "/api/user/device-token",
                                 body: #"{"deviceToken":"\#(Self.hexToken)","platform":"ios","appType":"customer"}"#, bearer: jwt)
        #expect(await server.request("GET", "/api/user/push-preferences", bearer: jwt).body == customerKeys)
        let unknown = await server.request("GET", "/api/user/push-preferences?appType=nope", bearer: jwt)
        #expect(unknown.status == 400)
        // A staff key is unknown to the customer app.
        let put = await server.request("PUT", "/api/user/push-preferences", body: #"{"newEnquiry":false}"#, bearer: jwt)
        #expect(put.status == 400)
        #expect(put.body == #"{"success":false,"error":"unknown preference 'newEnquiry' for app customer"}"#)
    }

    @Test func badInputIs400AndChangesNothing() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let jwt = Harness.jwt(sub: "dave")
        let t = Self.hexToken
        let bad: [String] = [
            #"{"platform":"ios","appType":"staff"}"#,
            #"{"deviceToken":"abc","platform":"ios","appType":"staff"}"#,
            #"{"deviceToken":"\#(t)0","platform":"ios","appType":"staff"}"#,  // odd count
            #"{"deviceToken":"\#(String(repeating: "g", count: 64))","platform":"ios","appType":"staff"}"#,
            #"{"deviceToken":"\#(String(repeating: "a", count: 202))","platform":"ios","appType":"staff"}"#,
            #"{"deviceToken":"\#(t)","platform":"windows","appType":"staff"}"#,
            #"{"deviceToken":"\#(t)","platform":"ios","appType":"admin"}"#,
            #"{"deviceToken":"\#(t)","platform":"ios","appType":"staff","environment":"dev"}"#,
            #"{"deviceToken":"\#(t)","platform":"ios","appType":"staff","deviceName":5}"#,
            #"{"deviceToken":"\#(t)","platform":"ios""#,
            #"["deviceToken"]"#,
            "",
        ]
        for body in bad {
            let r = await server.request("POST", "/api/user/device-token", body: body, bearer: jwt)
            #expect(r.status == 400, "\(body) → \(r.status) \(r.body)")
            #expect(r.body.hasPrefix(#"{"success":false,"error":""#))
        }
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: jwt).body == #"{"success":true,"tokens":[]}"#)

        for body in [#"{"newEnquiry":"no"}"#, #"{"newEnquiry":0}"#, #"{"unknownKey":true}"#, #"{"newEnquiry":false,"x":true}"#, "[]"] {
            let r = await server.request("PUT", "/api/user/push-preferences", body: body, bearer: jwt)
            #expect(r.status == 400, "\(body) → \(r.status) \(r.body)")
        }
        let prefs = await server.request("GET", "/api/user/push-preferences", bearer: jwt)
        #expect(!prefs.body.contains("false"), "nothing was saved: \(prefs.body)")
        // Android is stored (never sent).
        let android = await server.request("POST", "/api/user/device-token",
                                           body: #"{"deviceToken":"\#(t)","platform":"android","appType":"staff"}"#, bearer: jwt)
        #expect(android.status == 200)
    }

    /// The JWTs every test signs in process are the ones openssl signs: the service's
    /// HS256 check is held to an outside signer, not to its own C code alone.
    @Test func theHarnessSignsJWTsAsOpenSSLDoes() async throws {
        let jwt = Harness.jwt(sub: "user-1", exp: 4_102_444_800, companyID: "company-1")
        let parts = jwt.split(separator: ".")
        try #require(parts.count == 3)
        let hexKey = Harness.jwtSecret.utf8.map { String(format: "%02x", $0) }.joined()
        let r = await run("/usr/bin/openssl", ["dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:\(hexKey)", "-hex"],
                          stdin: Data((parts[0] + "." + parts[1]).utf8))
        try #require(r.status == 0, "openssl: \(r.stderr)")
        let expected = r.stdout.split(separator: "=").last!.trimmingCharacters(in: .whitespacesAndNewlines)
        var base64 = parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        let signature = try #require(Data(base64Encoded: base64))
        #expect(signature.map { String(format: "%02x", $0) }.joined() == expected)
    }

    @Test func authFailuresAre401() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let now = Int(Date().timeIntervalSince1970)
        let cases: [(String, String?)] = [
            ("no header", nil),
            ("alg none", Harness.jwt(sub: "eve", alg: "none")),
            ("alg none, HMAC signed", Harness.jwt(sub: "eve", alg: "none", secret: Harness.jwtSecret) + "x"),
            ("HS512 header", Harness.jwt(sub: "eve", alg: "HS512")),
            ("wrong signature", Harness.jwt(sub: "eve", secret: "another-secret-of-sufficient-length-0123456789")),
            ("expired", Harness.jwt(sub: "eve", exp: now - 60)),
            ("missing exp", Harness.jwt(sub: "eve", exp: nil)),
            ("missing sub", Harness.jwt(sub: nil)),
            ("garbage", "not.a.jwt"),
            ("the API key", Harness.apiKey),
        ]
        for (name, bearer) in cases {
            for (method, path, body) in [("GET", "/api/user/device-tokens", nil as String?),
                                         ("POST", "/api/user/device-token", #"{"deviceToken":"\#(Self.hexToken)","platform":"ios","appType":"staff"}"#),
                                         ("GET", "/api/user/push-preferences", nil)] {
                let r = await server.request(method, path, body: body, bearer: bearer)
                #expect(r.status == 401, "\(name): \(method) \(path) → \(r.status)")
                #expect(r.body.hasPrefix(#"{"success":false,"error":""#), "\(name): \(r.body)")
            }
        }
        // Tampered claims with the original signature.
        let good = Harness.jwt(sub: "eve")
        let parts = good.split(separator: ".")
        let forged = parts[0] + "." + Harness.b64url(Data(#"{"sub":"admin","exp":9999999999}"#.utf8)) + "." + parts[2]
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: String(forged)).status == 401)
        // Backend routes: no key, a wrong key, a user's JWT.
        for bearer in [nil, "wrong-api-key-0123456789abcdef", good] {
            let r = await server.request("POST", "/v1/notifications", body: "{}", bearer: bearer)
            #expect(r.status == 401)
        }
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: good).status == 200)
        // Never logged: the key, the secret, a whole JWT.
        let log = server.stderr
        #expect(!log.contains(Harness.apiKey) && !log.contains(Harness.jwtSecret) && !log.contains(good))
    }

    @Test func oversizedAndHostileBodies() async throws {
        let server = ServerProcess(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let jwt = Harness.jwt(sub: "frank")
        let big = #"{"deviceToken":""# + String(repeating: "a", count: 70_000) + #""}"#
        let r = await server.request("POST", "/api/user/device-token", body: big, bearer: jwt)
        #expect(r.status == 413)
        #expect(r.body == #"{"success":false,"error":"request body is larger than 65536 bytes"}"#)
        let b = await server.backend("POST", "/v1/notifications", big)
        #expect(b.status == 413)

        // Chunked, with no length announced: cut off at the limit.
        var head = "POST /api/user/device-token HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(jwt)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        for _ in 0..<20 { head += "1000\r\n" + String(repeating: "a", count: 4096) + "\r\n" }
        head += "0\r\n\r\n"
        let chunked = HTTP.parse(await HTTP.exchange(port: server.port, Array(head.utf8)))
        #expect(chunked.status == 413)

        // Deeply nested JSON: refused, not a crash.
        let deep = String(repeating: "[", count: 100_00) + String(repeating: "]", count: 100_00)
        #expect(await server.request("PUT", "/api/user/push-preferences", body: deep, bearer: jwt).status == 400)

        // A client that opens connections and sends half a request does not stop others.
        var idle: [Int32] = []
        for _ in 0..<50 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_port = server.port.bigEndian
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            let partial = "POST /api/user/device-token HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"de"
            _ = partial.withCString { write(fd, $0, strlen($0)) }
            idle.append(fd)
        }
        defer { idle.forEach { close($0) } }
        #expect(await server.request("GET", "/health").body == #"{"status":"ok"}"#)
        #expect(await server.request("GET", "/api/user/device-tokens", bearer: jwt).status == 200)

        let notFound = await server.request("GET", "/nope")
        #expect(notFound.status == 404)
        #expect(notFound.body == #"{"success":false,"error":"not found"}"#)
        #expect(server.isRunning)
    }
}
