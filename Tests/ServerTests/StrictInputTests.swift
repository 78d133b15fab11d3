import APNsMock
import Foundation
import Testing
import TestSupport

/// Strict JSON on every route and in the user JWT's claims, and numbers: a key
/// given twice or U+0000 in a string is a 400 (401 in a token) that stores nothing;
/// a number out of range is a 400, never a trap or a silent change; a Live
/// Activity's numbers reach APNs as written. Each on both stores.
@Suite(.serverPostgres) struct StrictInputTests {
    static func register(_ server: any APIServer, _ user: String, _ body: String) async -> HTTPResponse {
        await server.request("POST", "/api/user/device-token", body: body, bearer: Harness.jwt(sub: user))
    }

    static func devices(_ server: any APIServer, _ user: String) async -> String {
        await server.request("GET", "/api/user/device-tokens", bearer: Harness.jwt(sub: user)).body
    }

    static func error(_ r: HTTPResponse) -> String { r.json["error"] as? String ?? r.body }

    /// SQLite cut the text at U+0000 (a device name, an entity id, a `sub` of
    /// "alice\u0000x" acting as "alice"); PostgreSQL answered 500.
    @Test(arguments: ServerStore.allCases) func u0000InAnyStringIsA400AndNothingIsStored(_ store: ServerStore) async throws {
        try await withServer(store) { server in
            let t = Harness.tokens(2, seed: 71)
            let named = await Self.register(server, "ana",
                #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff","deviceName":"pho\u0000ne"}"#)
            #expect(named.status == 400, "\(named.body)")
            #expect(Self.error(named).hasPrefix("invalid JSON: U+0000 in a string at byte "), "\(named.body)")
            let inKey = await Self.register(server, "ana",
                #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff","x\u0000":1}"#)
            #expect(inKey.status == 400 && Self.error(inKey).hasPrefix("invalid JSON: U+0000"), "\(inKey.body)")
            #expect(await Self.devices(server, "ana") == #"{"success":true,"tokens":[]}"#)

            let ok = await Self.register(server, "ana", #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff"}"#)
            #expect(ok.status == 200, "\(ok.body)")
            let notify = await server.backend("POST", "/v1/notifications",
                #"{"type":"order_created","entity_type":"order","entity_id":"o\u00001","app_type":"staff","user_ids":["ana"],"alert":{"title":"t","body":"b"}}"#)
            #expect(notify.status == 400 && Self.error(notify).hasPrefix("invalid JSON: U+0000"), "\(notify.body)")

            // The token's claims are read the same way: "alice\u0000x" is not "alice".
            let forged = Harness.signed(claims: #"{"sub":"alice\u0000x","exp":\#(Harness.inAnHour)}"#)
            let asAlice = await server.request("POST", "/api/user/device-token",
                body: #"{"deviceToken":"\#(t[1])","platform":"ios","appType":"staff"}"#, bearer: forged)
            #expect(asAlice.status == 401 && asAlice.body == #"{"success":false,"error":"invalid token"}"#, "\(asAlice.body)")
            #expect(await Self.devices(server, "alice") == #"{"success":true,"tokens":[]}"#)
        }
    }

    /// PostgreSQL answered 500 for U+0000 in a query or path parameter (found by schemathesis).
    @Test(arguments: ServerStore.allCases) func u0000InTheURLIsA400(_ store: ServerStore) async throws {
        try await withServer(store) { server in
            for path in ["/v1/deliveries?apns_id=T%00b", "/v1/channels?app_type=customer&entity_type=%00%0E",
                         "/v1/notifications/a%00b", "/v1/broadcasts/a%00b", "/v1/webhook-events?state=%00"] {
                let r = await server.backend("GET", path)
                #expect(r.status == 400 && r.body == #"{"success":false,"error":"the URL has a U+0000 (%00)"}"#, "\(path): \(r.body)")
            }
        }
    }

    /// One reader took the first of two equal keys, another the last, and APNs got both.
    @Test(arguments: ServerStore.allCases) func aKeyGivenTwiceIsA400NamingIt(_ store: ServerStore) async throws {
        try await withServer(store) { server in
            let t = Harness.tokens(2, seed: 72)
            let twice = await Self.register(server, "ana",
                #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff","deviceToken":"\#(t[1])"}"#)
            #expect(twice.status == 400, "\(twice.body)")
            #expect(Self.error(twice).hasPrefix(#"invalid JSON: duplicate key "deviceToken" at byte "#), "\(twice.body)")
            #expect(await Self.devices(server, "ana") == #"{"success":true,"tokens":[]}"#)

            let ok = await Self.register(server, "ana", #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff"}"#)
            #expect(ok.status == 200, "\(ok.body)")
            // Deep inside `data`, as APNs would have got it.
            let nested = await server.backend("POST", "/v1/notifications",
                #"{"type":"order_created","app_type":"staff","user_ids":["ana"],"data":{"order":{"id":1,"id":2}}}"#)
            #expect(nested.status == 400 && Self.error(nested).hasPrefix(#"invalid JSON: duplicate key "id" at byte "#),
                    "\(nested.body)")
            let prefs = await server.request("PUT", "/api/user/push-preferences",
                body: #"{"orderCreated":false,"orderCreated":true}"#, bearer: Harness.jwt(sub: "ana"))
            #expect(prefs.status == 400 && Self.error(prefs).hasPrefix(#"invalid JSON: duplicate key "orderCreated""#),
                    "\(prefs.body)")
            let saved = await server.request("GET", "/api/user/push-preferences", bearer: Harness.jwt(sub: "ana"))
            #expect(saved.body.contains(#""orderCreated":true"#), "nothing saved: \(saved.body)")

            // In a token: which `sub` is meant?
            let two = Harness.signed(claims: #"{"sub":"ana","sub":"bo","exp":\#(Harness.inAnHour)}"#)
            let r = await server.request("GET", "/api/user/device-tokens", bearer: two)
            #expect(r.status == 401 && r.body == #"{"success":false,"error":"invalid token"}"#, "\(r.body)")
            let header = Harness.signed(claims: #"{"sub":"ana","exp":\#(Harness.inAnHour)}"#,
                                        header: #"{"alg":"none","alg":"HS256"}"#)
            #expect(await server.request("GET", "/api/user/device-tokens", bearer: header).status == 401)
        }
    }

    /// `exp` 1e300 trapped in the conversion to Int64 and took the process down.
    @Test(arguments: ServerStore.allCases) func outOfRangeNumbersAreA400OrA401NeverATrap(_ store: ServerStore) async throws {
        try await withServer(store) { server in
            for claims in [#"{"sub":"ana","exp":1e300}"#, #"{"sub":"ana","exp":-1e300}"#,
                           #"{"sub":"ana","exp":9223372036854775808}"#, #"{"sub":"ana","exp":1e400}"#,
                           #"{"sub":"ana","exp":\#(Harness.inAnHour),"nbf":1e300}"#,
                           #"{"sub":"ana","exp":\#(Harness.inAnHour),"nbf":-1e19}"#] {
                let r = await server.request("GET", "/api/user/device-tokens", bearer: Harness.signed(claims: claims))
                #expect(r.status == 401 && r.body == #"{"success":false,"error":"invalid token"}"#, "\(claims): \(r.status) \(r.body)")
            }
            #expect(server.isRunning)
            let fine = await server.request("GET", "/api/user/device-tokens",
                                            bearer: Harness.signed(claims: #"{"sub":"ana","exp":\#(Harness.inAnHour).5,"nbf":1.5}"#))
            #expect(fine.status == 200, "a fraction is a NumericDate too: \(fine.body)")

            let t = Harness.tokens(1, seed: 73)
            #expect(await Self.register(server, "ana", #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff"}"#).status == 200)
            let huge = "123456789012345678901234567890"
            let notifications: [(String, String)] = [
                (#""badge":\#(huge)"#, "badge must be an integer 0 or more"),
                (#""badge":1e400"#, "badge must be an integer 0 or more"),
                (#""badge":{"ana":\#(huge)}"#, "badge.ana must be an integer 0 or more"),
                (#""alert":"a","priority":1e400"#, "priority must be low, normal, high or critical (or APNs' 10, 5 or 1)"),
                (#""alert":"a","expiration":\#(huge)"#, "expiration must be a UNIX time in seconds, 0 or more"),
            ]
            for (fields, message) in notifications {
                let r = await server.backend("POST", "/v1/notifications",
                    #"{"type":"order_created","app_type":"staff","user_ids":["ana"],\#(fields)}"#)
                #expect(r.status == 400 && Self.error(r) == message, "\(fields): \(r.status) \(r.body)")
            }
            let liveActivities: [(String, String)] = [
                (#""timestamp":\#(huge)"#, "timestamp must be a UNIX time in seconds"),
                (#""stale_date":1e400"#, "stale_date must be a UNIX time in seconds"),
                (#""relevance_score":1e400"#, "relevance_score must be a number within a double's range"),
                (#""priority":\#(huge)"#, "priority must be 10 or 5 for a Live Activity"),
                (#""expiration":-\#(huge)"#, "expiration must be a UNIX time in seconds, 0 or more"),
            ]
            for (fields, message) in liveActivities {
                let r = await server.backend("POST", "/v1/live-activities",
                    #"{"app_type":"staff","event":"update","user_ids":["ana"],"content_state":{"s":1},\#(fields)}"#)
                #expect(r.status == 400 && Self.error(r) == message, "\(fields): \(r.status) \(r.body)")
            }
            let page = await server.backend("GET", "/v1/notifications/x?limit=\(huge)")
            #expect(page.status == 400 && Self.error(page) == "limit must be an integer from 1 to 10000", "\(page.body)")
            let after = await server.backend("GET", "/v1/notifications/x?after=\(huge)")
            #expect(after.status == 400 && Self.error(after) == "after must be the 'next' of a previous page", "\(after.body)")
            // Digits only, as `next` is written: a sign is not part of a page's cursor.
            for query in ["limit=%2B5", "limit=-1", "limit=5.0", "after=%2B1", "after=-0", "after=1e3", "after=%201"] {
                let r = await server.backend("GET", "/v1/webhook-events?\(query)")
                #expect(r.status == 400, "\(query): \(r.body)")
            }
            #expect(server.isRunning)
        }
    }

    /// A Live Activity's `content_state` and `attributes` reach APNs with their numbers
    /// as written, as a notification's `data` does: 1e400 was sent as null, a 30-digit
    /// integer as a float.
    @Test(arguments: ServerStore.allCases) func liveActivityNumbersAreSentAsWritten(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        try await withServer(store, production: production) { server in
            let t = Harness.tokens(2, seed: 74)
            await LiveActivityServerTests.registerToken(server, user: "ana", token: t[0], activity: "act-n")
            await LiveActivityServerTests.registerToken(server, user: "ana", token: t[1])
            let numbers = #"{"big":1e400,"id":123456789012345678901234567890,"ratio":1.50,"neg":-0,"e":2E-3}"#
            let update = try await LiveActivityServerTests.send(server,
                #"{"app_type":"staff","event":"update","activity_id":"act-n","content_state":\#(numbers),"timestamp":1790000000}"#)
            let start = try await LiveActivityServerTests.send(server,
                #"{"app_type":"staff","event":"start","user_ids":["ana"],"attributes_type":"DeliveryAttributes","attributes":\#(numbers),"content_state":{"n":10000000000000000000001},"timestamp":1790000001,"alert":{"title":"t","body":"b"}}"#)
            _ = (update, start)
            try await server.drained()
            let bodies = production.recordedRequests().map { String(decoding: $0.body, as: UTF8.self) }
            #expect(bodies.contains(#"{"aps":{"timestamp":1790000000,"event":"update","content-state":\#(numbers)}}"#), "\(bodies)")
            #expect(bodies.contains(#"{"aps":{"alert":{"title":"t","body":"b"},"timestamp":1790000001,"event":"start","content-state":{"n":10000000000000000000001},"attributes-type":"DeliveryAttributes","attributes":\#(numbers)}}"#), "\(bodies)")

            // What a notification's data does with the same numbers.
            let reg = await Self.register(server, "ana", #"{"deviceToken":"\#(Harness.tokens(1, seed: 75)[0])","platform":"ios","appType":"staff"}"#)
            #expect(reg.status == 200)
            let n = await server.backend("POST", "/v1/notifications",
                #"{"type":"order_created","app_type":"staff","user_ids":["ana"],"data":{"numbers":\#(numbers)}}"#)
            #expect(n.status == 202, "\(n.body)")
            try await server.drained()
            let last = production.recordedRequests().map { String(decoding: $0.body, as: UTF8.self) }.last ?? ""
            #expect(last.contains(#""numbers":\#(numbers)"#), "\(last)")
        }
    }
}
