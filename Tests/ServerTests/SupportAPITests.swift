import APNsMock
import Foundation
import Testing
import TestSupport

/// The backend routes support reads (and the console calls): a user's devices in
/// every state, preferences and deliveries; recent notifications with counts; the
/// tokens deactivated lately; a test push to one device; the last hour's counts.
/// On both stores, through the real worker and a real mock.
@Suite(.serverPostgres) struct SupportAPITests {
    @Test(arguments: ServerStore.allCases)
    func aUsersDevicesPreferencesAndDeliveries(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 710)
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        try await withServer(store, production: production) { server in
            await BackendAPITests.register(server, user: "sam", token: t[0])
            await BackendAPITests.register(server, user: "sam", token: t[1], app: "customer")
            await BackendAPITests.register(server, user: "sam", token: t[2])
            let jwt = Harness.jwt(sub: "sam")
            let logout = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(t[2])"}"#,
                                              bearer: jwt)
            #expect(logout.status == 200)
            let quiet = await server.request("PUT", "/api/user/push-preferences?appType=staff",
                body: #"{"quoteApproved":false,"quietHoursEnabled":true,"quietHoursStart":"22:00","quietHoursEnd":"07:00","timeZone":"Europe/London"}"#,
                bearer: jwt)
            #expect(quiet.status == 200, "\(quiet.body)")
            var ids: [String] = []
            for _ in 0..<3 { ids.append(try await WorkerTests.notify(server, users: ["sam"], type: "order_created")) }
            try await server.drained()

            let devices = await server.backend("GET", "/v1/users/sam/device-tokens")
            #expect(devices.status == 200, "\(devices.body)")
            let tokens = try #require(devices.json["tokens"] as? [[String: Any]])
            #expect(tokens.count == 3, "every token, active or not")
            let byToken = Dictionary(uniqueKeysWithValues: tokens.map { ($0["token"] as! String, $0) })
            #expect(byToken[t[0]]?["active"] as? Bool == true)
            #expect(byToken[t[0]]?["environment"] as? String == "production")
            #expect(byToken[t[0]]?["app_type"] as? String == "staff")
            #expect(byToken[t[0]]?["last_used_at"] is String, "delivered to: its last use is shown")
            #expect(byToken[t[1]]?["app_type"] as? String == "customer")
            #expect(byToken[t[2]]?["active"] as? Bool == false)
            #expect(byToken[t[2]]?["deactivated_reason"] as? String == "unregistered")
            #expect(byToken[t[2]]?["deactivated_at"] is String)

            let prefs = await server.backend("GET", "/v1/users/sam/push-preferences")
            #expect(prefs.status == 200)
            let staff = try #require((prefs.json["preferences"] as? [String: Any])?["staff"] as? [String: Any])
            #expect(staff["quoteApproved"] as? Bool == false)
            #expect(staff["orderCreated"] as? Bool == true)
            #expect(staff["quietHoursStart"] as? String == "22:00")
            #expect(staff["timeZone"] as? String == "Europe/London")
            #expect((prefs.json["preferences"] as? [String: Any])?["customer"] != nil)
            let one = await server.backend("GET", "/v1/users/sam/push-preferences?app_type=customer")
            #expect((one.json["preferences"] as? [String: Any])?.keys.sorted() == ["customer"])
            #expect(await server.backend("GET", "/v1/users/sam/push-preferences?app_type=nope").status == 400)

            // Deliveries newest first, a page at a time, every one once.
            var seen: [String] = []
            var after: String?
            repeat {
                let page = await server.backend("GET", "/v1/users/sam/deliveries?limit=2" + (after.map { "&after=\($0)" } ?? ""))
                #expect(page.status == 200, "\(page.body)")
                let items = try #require(page.json["deliveries"] as? [[String: Any]])
                #expect(items.allSatisfy { $0["state"] as? String == "delivered" && $0["token"] as? String == t[0] })
                seen += items.map { $0["notification_id"] as! String }
                after = page.json["next"] as? String
            } while after != nil
            #expect(seen == ids.reversed())

            // Another user's data is not there; a user with nothing is empty, not an error.
            #expect((await server.backend("GET", "/v1/users/nobody/device-tokens").json["tokens"] as? [Any])?.isEmpty == true)
            #expect((await server.backend("GET", "/v1/users/nobody/deliveries").json["deliveries"] as? [Any])?.isEmpty == true)

            // Bad paging: a 400 naming the parameter.
            let badLimit = await server.backend("GET", "/v1/users/sam/deliveries?limit=0")
            #expect(badLimit.status == 400)
            #expect(badLimit.body == #"{"success":false,"error":"limit must be an integer from 1 to 500"}"#)
            let badAfter = await server.backend("GET", "/v1/users/sam/deliveries?after=x")
            #expect(badAfter.body == #"{"success":false,"error":"after must be the 'next' of a previous page"}"#)
        }
    }

    @Test(arguments: ServerStore.allCases)
    func recentNotificationsWithCountsAndDeactivatedTokensWithReasons(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 720)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let production = try Harness.mock(sandbox: false) {
            $0.unregistered = [t[1]: now + 3_600_000]
            $0.forced = [t[2]: .error(400, "DeviceTokenNotForTopic")]
        }
        defer { production.stop() }
        try await withServer(store, production: production) { server in
            for (i, token) in t.enumerated() { await BackendAPITests.register(server, user: "r\(i)", token: token) }
            let first = try await WorkerTests.notify(server, users: ["r0"])
            let second = try await WorkerTests.notify(server, users: ["r0", "r1", "r2"])
            try await server.drained()
            let third = try await WorkerTests.notify(server, users: ["r0", "r1", "r2"], type: "order_created")
            try await server.drained()

            let page1 = await server.backend("GET", "/v1/notifications?limit=2")
            #expect(page1.status == 200, "\(page1.body)")
            let items1 = try #require(page1.json["notifications"] as? [[String: Any]])
            #expect(items1.map { $0["notification_id"] as? String } == [third, second])
            let summary = try #require(items1[1]["summary"] as? [String: Int])
            #expect(summary == ["pending": 0, "delivered": 1, "failed": 2])
            #expect(items1[0]["summary"] as? [String: Int] == ["pending": 0, "delivered": 1, "failed": 0],
                    "the dead tokens got nothing more")
            #expect(items1[1]["app_type"] as? String == "staff" && items1[1]["type"] as? String == "order_status_changed")
            let next = try #require(page1.json["next"] as? String)
            let page2 = await server.backend("GET", "/v1/notifications?limit=2&after=\(next)")
            let items2 = try #require(page2.json["notifications"] as? [[String: Any]])
            #expect(items2.map { $0["notification_id"] as? String } == [first])
            #expect(page2.json["next"] == nil)
            #expect(await server.backend("GET", "/v1/notifications?after=nodot").status == 400)

            let dead = await server.backend("GET", "/v1/deactivated-device-tokens?hours=1")
            #expect(dead.status == 200, "\(dead.body)")
            let tokens = try #require(dead.json["tokens"] as? [[String: Any]])
            #expect(Set(tokens.map { $0["token"] as! String }) == [t[1], t[2]])
            let reasons = Dictionary(uniqueKeysWithValues: tokens.map { ($0["user_id"] as! String, $0["deactivated_reason"] as? String) })
            #expect(reasons == ["r1": "Unregistered", "r2": "DeviceTokenNotForTopic"])
            let firstOnly = await server.backend("GET", "/v1/deactivated-device-tokens?limit=1")
            let after = try #require(firstOnly.json["next"] as? String)
            let rest = await server.backend("GET", "/v1/deactivated-device-tokens?limit=1&after=\(after)")
            let both = ((firstOnly.json["tokens"] as? [[String: Any]]) ?? []) + ((rest.json["tokens"] as? [[String: Any]]) ?? [])
            #expect(Set(both.map { $0["token"] as! String }) == [t[1], t[2]])
            #expect(await server.backend("GET", "/v1/deactivated-device-tokens?hours=0").status == 400)

            // This process's last hour: 5 delivered, 2 failures by reason.
            let stats = await server.backend("GET", "/v1/stats/deliveries?seconds=3600")
            #expect(stats.status == 200)
            #expect((stats.json["delivered"] as? [Int])?.count == 3600)
            #expect((stats.json["delivered"] as? [Int])?.reduce(0, +) == 3)
            #expect((stats.json["failed"] as? [Int])?.reduce(0, +) == 2)
            #expect(stats.json["failed_by_reason"] as? [String: Int] == ["Unregistered": 1, "DeviceTokenNotForTopic": 1])
            #expect(await server.backend("GET", "/v1/stats/deliveries?seconds=3601").status == 400)
        }
    }

    @Test(arguments: ServerStore.allCases)
    func aTestPushGoesToOneDeviceAndItsAnswerIsLogged(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 730)
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        try await withServer(store, production: production) { server in
            await BackendAPITests.register(server, user: "pat", token: t[0])
            await BackendAPITests.register(server, user: "pat", token: t[1])
            await BackendAPITests.register(server, user: "pat", token: t[2], platform: "android")
            await BackendAPITests.register(server, user: "lee", token: Harness.tokens(1, seed: 731)[0])
            let devices = try #require(await server.backend("GET", "/v1/users/pat/device-tokens").json["tokens"] as? [[String: Any]])
            let id = { (token: String) in devices.first { $0["token"] as? String == token }!["id"] as! Int }
            let lee = try #require((await server.backend("GET", "/v1/users/lee/device-tokens").json["tokens"] as? [[String: Any]])?.first?["id"] as? Int)

            let sent = await server.backend("POST", "/v1/users/pat/test-push", #"{"device_id":\#(id(t[1]))}"#)
            #expect(sent.status == 202, "\(sent.body)")
            let apnsID = try #require(sent.json["apns_id"] as? String)
            try await server.drained()
            let d = await server.backend("GET", "/v1/deliveries?apns_id=\(apnsID)")
            #expect(d.json["state"] as? String == "delivered" && d.json["token"] as? String == t[1])
            #expect(d.json["user_id"] as? String == "pat")
            #expect(production.attempts(for: t[1]) == 1 && production.attempts(for: t[0]) == 0, "that device only")
            let body = try #require(production.recordedRequests().last.map { String(decoding: $0.body, as: UTF8.self) })
            #expect(body.contains(#""type":"test""#) && body.contains("Sent from the apns-server console"))

            // Refused, and nothing sent: another user's device, an Android token, bad bodies.
            let before = production.recordedRequests().count
            for (body, status, error) in [
                (#"{"device_id":\#(lee)}"#, 404, "device token not found"),
                (#"{"device_id":\#(id(t[2]))}"#, 409, "only an iOS token of a configured app can be sent to"),
                (#"{}"#, 400, "device_id must be the id of one of the user's device tokens"),
                (#"{"device_id":\#(id(t[0])),"x":1}"#, 400, "unknown field 'x' (device_id, alert)"),
                (#"{"device_id":\#(id(t[0])),"alert":""}"#, 400, "alert must be 1 to 256 bytes of text without control characters"),
            ] {
                let r = await server.backend("POST", "/v1/users/pat/test-push", body)
                #expect(r.status == status, "\(body)")
                #expect(r.body == #"{"success":false,"error":"\#(error)"}"#)
            }
            let unregistered = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(t[0])"}"#,
                                                    bearer: Harness.jwt(sub: "pat"))
            #expect(unregistered.status == 200)
            let inactive = await server.backend("POST", "/v1/users/pat/test-push", #"{"device_id":\#(id(t[0]))}"#)
            #expect(inactive.status == 409)
            #expect(inactive.body == #"{"success":false,"error":"the device token is not active (unregistered)"}"#)
            try await server.drained()
            #expect(production.recordedRequests().count == before)
        }
    }

    /// Every support route answers a missing or wrong key as the rest of the API does.
    /// A path names a user as a body does: `/v1/users/a%20b/…` is the user "a b", on
    /// every route that takes one. An escape that hides a control character, or is not
    /// UTF-8, is a 400 that stores nothing.
    @Test(arguments: ServerStore.allCases)
    func aUserIDInThePathIsPercentDecoded(_ store: ServerStore) async throws {
        let t = Harness.tokens(3, seed: 730)
        try await withServer(store) { server in
            await BackendAPITests.register(server, user: "ana%20m%2F1", token: t[0])
            let bulk = await server.backend("POST", "/v1/device-tokens",
                #"{"devices":[{"user_id":"ana m/1","deviceToken":"\#(t[1])","platform":"ios","appType":"staff"}]}"#)
            #expect(bulk.status == 200, "\(bulk.body)")
            let devices = await server.backend("GET", "/v1/users/ana%20m%2F1/device-tokens")
            #expect(devices.json["user_id"] as? String == "ana m/1")
            let tokens = (devices.json["tokens"] as? [[String: Any]])?.compactMap { $0["token"] as? String }
            #expect(tokens?.sorted() == [t[0], t[1]].sorted(), "one user, whichever way it was named")
            #expect((await server.backend("GET", "/v1/users/ana%20m%2F1/deliveries")).status == 200)

            for bad in ["a%15b", "a%0Ab", "a%zz", "%C3", "%FF"] {
                let r = await server.backend("POST", "/v1/users/\(bad)/device-tokens",
                    #"{"deviceToken":"\#(t[2])","platform":"ios","appType":"staff"}"#)
                #expect(r.status == 400, "\(bad): \(r.body)")
                #expect(await server.backend("GET", "/v1/users/\(bad)/device-tokens").status == 400, "\(bad)")
                let live = await server.backend("POST", "/v1/users/\(bad)/live-activity-tokens",
                    #"{"pushToken":"\#(t[2])","appType":"staff","attributesType":"RepairAttributes"}"#)
                #expect(live.status == 400, "\(bad): \(live.body)")
            }
            #expect((await server.backend("GET", "/v1/users/a%15b/device-tokens")).body
                    == #"{"success":false,"error":"user id must be 1 to 256 characters"}"#)
            #expect((await server.backend("GET", "/v1/users/a%zz/device-tokens")).body
                    == #"{"success":false,"error":"user_id in the path is not percent-encoded UTF-8"}"#)
        }
    }

    @Test func everySupportRouteNeedsTheAPIKey() async throws {
        try await withServer(.sqlite) { server in
            let routes = [("GET", "/v1/users/u/device-tokens"), ("GET", "/v1/users/u/push-preferences"),
                          ("GET", "/v1/users/u/deliveries"), ("POST", "/v1/users/u/test-push"),
                          ("GET", "/v1/notifications"), ("GET", "/v1/deactivated-device-tokens"),
                          ("GET", "/v1/stats/deliveries")]
            for (method, path) in routes {
                let none = await server.request(method, path, body: method == "POST" ? "{}" : nil)
                #expect(none.status == 401 && none.body == #"{"success":false,"error":"missing API key"}"#, "\(path)")
                let wrong = await server.request(method, path, body: method == "POST" ? "{}" : nil, bearer: "wrong-key")
                #expect(wrong.status == 401 && wrong.body == #"{"success":false,"error":"invalid API key"}"#, "\(path)")
                let user = await server.request(method, path, body: method == "POST" ? "{}" : nil,
                                                bearer: Harness.jwt(sub: "u"))
                #expect(user.status == 401, "a user's JWT is not a key: \(path)")
            }
        }
    }
}
