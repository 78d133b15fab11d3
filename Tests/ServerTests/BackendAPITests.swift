import APNsMock
import Foundation
import Testing
import TestSupport

/// The backend-facing endpoints: registering for a user, fan-out with preferences,
/// companies and badges, the delivery log, and what a bad request leaves (nothing).
@Suite struct BackendAPITests {
    static func register(_ server: any APIServer, user: String, token: String, app: String = "staff",
                         company: String? = nil, environment: String = "production", platform: String = "ios") async {
        let companyField = company.map { #","company_id":"\#($0)""# } ?? ""
        let r = await server.backend("POST", "/v1/users/\(user)/device-tokens",
                                     #"{"deviceToken":"\#(token)","platform":"\#(platform)","appType":"\#(app)","environment":"\#(environment)"\#(companyField)}"#)
        #expect(r.status == 200, "\(r.body)")
        #expect(r.body == #"{"success":true,"message":"Device token registered successfully"}"#)
    }

    @Test func fanOutWithPreferencesBadgesAndTheLog() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(6, seed: 11)
        await Self.register(server, user: "u1", token: t[0])
        await Self.register(server, user: "u1", token: t[1])
        await Self.register(server, user: "u2", token: t[2])
        await Self.register(server, user: "u3", token: t[3])  // turns the type off
        await Self.register(server, user: "u4", token: t[4])  // turns everything off
        await Self.register(server, user: "u6", token: t[5], platform: "android")  // never sent
        _ = await server.request("PUT", "/api/user/push-preferences", body: #"{"orderStatusChanged":false}"#,
                                 bearer: Harness.jwt(sub: "u3"))
        _ = await server.request("PUT", "/api/user/push-preferences", body: #"{"notificationsEnabled":false}"#,
                                 bearer: Harness.jwt(sub: "u4"))

        let body = #"{"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","app_type":"staff","user_ids":["u1","u2","u3","u4","u5","u6","u1"],"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":{"u1":3,"u2":0},"sound":"default","data":{"orderNumber":1234,"deepLink":"app://order/1"},"collapse_id":"order-1234","priority":10}"#
        let r = await server.backend("POST", "/v1/notifications", body)
        #expect(r.status == 202, "\(r.body)")
        let id = try #require(r.json["notification_id"] as? String)
        #expect(r.body == #"{"notification_id":"\#(id)","deliveries":3,"skipped":{"preferences":2,"no_devices":2}}"#)
        try await server.drained()

        let requests = production.recordedRequests()
        #expect(requests.count == 3)
        let byToken = Dictionary(uniqueKeysWithValues: requests.map { ($0.token!, $0) })
        #expect(Set(byToken.keys) == Set([t[0], t[1], t[2]]))
        let u1 = String(decoding: try #require(byToken[t[0]]).body, as: UTF8.self)
        #expect(u1 == #"{"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":3,"sound":"default"},"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid","orderNumber":1234,"deepLink":"app://order/1"}"#)
        let u2 = String(decoding: try #require(byToken[t[2]]).body, as: UTF8.self)
        #expect(u2.hasPrefix(#"{"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":0,"sound":"default"}"#))
        let first = try #require(byToken[t[0]])
        #expect(first.header("apns-topic") == Harness.pki.topic)
        #expect(first.header("apns-push-type") == "alert")
        #expect(first.header("apns-collapse-id") == "order-1234")
        #expect(first.header("apns-priority") == "10")

        let log = await server.backend("GET", "/v1/notifications/\(id)")
        #expect(log.status == 200)
        let json = log.json
        #expect(log.body.hasPrefix(#"{"notification_id":"\#(id)","type":"order_status_changed","entity_id":"order-uuid","created_at":""#))
        #expect(log.body.contains(#","summary":{"pending":0,"delivered":3,"failed":0},"deliveries":[{"user_id":""#))
        let deliveries = try #require(json["deliveries"] as? [[String: Any]])
        #expect(deliveries.count == 3)
        for d in deliveries {
            let apnsID = try #require(d["apns_id"] as? String)
            let token = try #require(d["token"] as? String)
            #expect(byToken[token]?.header("apns-id") == apnsID, "the log's apns-id is the one APNs saw")
            #expect(d["state"] as? String == "delivered")
            #expect(d["status"] as? Int == 200)
            #expect(d["reason"] is NSNull)
            #expect(d["environment"] as? String == "production")
            #expect(d["attempts"] as? Int == 1)
            #expect(d["finished_at"] is String)
            let one = await server.backend("GET", "/v1/deliveries?apns_id=\(apnsID)")
            #expect(one.status == 200)
            #expect(one.body.hasPrefix(#"{"notification_id":"\#(id)","user_id":""#))
            #expect(one.json["token"] as? String == token)
        }
        let keys = #"{"user_id":"u1","token":"\#(t[0])","environment":"production","state":"delivered","apns_id":""#
        #expect(log.body.contains(keys))
        #expect(await server.backend("GET", "/v1/notifications/nope").status == 404)
        #expect(await server.backend("GET", "/v1/deliveries?apns_id=00000000-0000-0000-0000-000000000000").status == 404)

        // A type without a preference key follows the master toggle alone.
        let master = await server.backend("POST", "/v1/notifications",
            #"{"type":"device_assigned","entity_type":"device","entity_id":"d1","app_type":"staff","user_ids":["u3","u4"],"alert":{"title":"t","body":"b"}}"#)
        #expect(master.body.hasSuffix(#""deliveries":1,"skipped":{"preferences":1,"no_devices":0}}"#), "\(master.body)")

        let metrics = await server.metrics()
        #expect(metrics.status == 200)
        #expect(metrics.body.contains(#"apns_server_deliveries_total{app="staff",type="order_status_changed",result="delivered",reason="Success"} 3"#))
        #expect(metrics.body.contains("apns_server_delivery_latency_seconds_bucket"))
        #expect(metrics.body.contains("apns_server_outbox_depth"))
        #expect(await server.request("GET", "/health").body == #"{"status":"ok"}"#)
    }

    @Test func companyFanOut() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(4, seed: 12)
        // The company from the app's JWT claim, and from the backend's registration.
        let jwt = Harness.jwt(sub: "staff-a", companyID: "c1")
        let reg = await server.request("POST", "/api/user/device-token",
                                       body: #"{"deviceToken":"\#(t[0])","platform":"ios","appType":"staff"}"#, bearer: jwt)
        #expect(reg.status == 200)
        await Self.register(server, user: "staff-b", token: t[1], company: "c1")
        await Self.register(server, user: "staff-c", token: t[2], company: "c2")
        await Self.register(server, user: "cust-d", token: t[3], app: "customer", company: "c1")
        let r = await server.backend("POST", "/v1/notifications",
            #"{"type":"enquiry_received","entity_type":"enquiry","entity_id":"e1","app_type":"staff","company_id":"c1","alert":{"title":"New enquiry","body":"Hi"},"badge":2}"#)
        #expect(r.status == 202)
        #expect(r.body.hasSuffix(#""deliveries":2,"skipped":{"preferences":0,"no_devices":0}}"#), "\(r.body)")
        try await server.drained()
        #expect(Set(production.recordedRequests().compactMap(\.token)) == [t[0], t[1]])
    }

    @Test func badNotificationsAre400AndStoreNothing() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        await Self.register(server, user: "u1", token: Harness.tokens(1, seed: 13)[0])
        let alert = #""alert":{"title":"t","body":"b"}"#
        let bad = [
            #"{"type":"x","app_type":"staff",\#(alert)}"#,  // neither
            #"{"type":"x","app_type":"staff","user_ids":["u1"],"company_id":"c1",\#(alert)}"#,  // both
            #"{"type":"x","app_type":"nope","user_ids":["u1"],\#(alert)}"#,
            #"{"app_type":"staff","user_ids":["u1"],\#(alert)}"#,
            #"{"type":"x","app_type":"staff","user_ids":[],\#(alert)}"#,
            #"{"type":"x","app_type":"staff","user_ids":[1],\#(alert)}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"collapse_id":"a\nb"}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"collapse_id":"\#(String(repeating: "c", count: 65))"}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],"alert":{"title":"\#(String(repeating: "x", count: 4100))"}}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"data":{"blob":"\#(String(repeating: "y", count: 4060))"},"badge":{"u1":1}}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"badge":-1}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"priority":7}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"data":{"aps":{}}}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert),"data":[1]}"#,
            #"{"type":"x","app_type":"staff","user_ids":["u1"]}"#,
            "{",
        ]
        for body in bad {
            let r = await server.backend("POST", "/v1/notifications", body)
            #expect(r.status == 400, "\(body.prefix(120)) → \(r.status) \(r.body)")
            #expect(r.body.hasPrefix(#"{"success":false,"error":""#))
        }
        let store = try server.store()
        #expect(try await store.outboxDepth() == 0)
        // The same request, well-formed, is accepted.
        let ok = await server.backend("POST", "/v1/notifications", #"{"type":"x","app_type":"staff","user_ids":["u1"],\#(alert)}"#)
        #expect(ok.status == 202)
    }

    @Test func bulkRegistration() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let t = Harness.tokens(3, seed: 14)
        let ok = await server.backend("POST", "/v1/device-tokens",
            #"{"devices":[{"user_id":"b1","company_id":"c9","deviceToken":"\#(t[0])","platform":"ios","appType":"staff"},{"user_id":"b2","deviceToken":"\#(t[1])","platform":"ios","appType":"customer","environment":"sandbox"}]}"#)
        #expect(ok.body == #"{"success":true,"registered":2}"#)
        let bad = await server.backend("POST", "/v1/device-tokens",
            #"{"devices":[{"user_id":"b3","deviceToken":"\#(t[2])","platform":"ios","appType":"staff"},{"user_id":"b4","deviceToken":"xyz","platform":"ios","appType":"staff"}]}"#)
        #expect(bad.status == 400)
        #expect(bad.body.contains("devices[1]"))
        #expect(await WorkerTests.tokenCount(server, user: "b1") == 1)
        #expect(await WorkerTests.tokenCount(server, user: "b3") == 0, "one bad entry: nothing stored")
        #expect(await server.request("POST", "/v1/device-tokens", body: "{}", bearer: nil).status == 401)
        // A company id that is not a string is refused, as the one-device route refuses it,
        // not dropped (the device would miss its company's notifications).
        for company in ["5", "true", #"["c9"]"#, #""""#] {
            let r = await server.backend("POST", "/v1/device-tokens",
                #"{"devices":[{"user_id":"b5","company_id":\#(company),"deviceToken":"\#(t[2])","platform":"ios","appType":"staff"}]}"#)
            #expect(r.status == 400, "company_id \(company): \(r.body)")
            #expect(r.body == #"{"success":false,"error":"devices[0].company_id must be a string (1 to 256 characters)"}"#)
        }
        #expect(await WorkerTests.tokenCount(server, user: "b5") == 0)
    }

    /// A big fan-out is read a page at a time: `limit` (default 1,000) and the
    /// previous page's `next`; the summary counts every delivery on every page.
    @Test func theLogOfANotificationIsReadInPages() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = InProcessServer(sandbox: nil, production: production)
        try await server.start()
        defer { Task { await server.stop() } }
        let tokens = Harness.tokens(25, seed: 41)
        for (i, token) in tokens.enumerated() { await Self.register(server, user: "p\(i)", token: token, company: "pages") }
        let sent = await server.backend("POST", "/v1/notifications",
            #"{"type":"x","app_type":"staff","company_id":"pages","alert":{"title":"t","body":"b"}}"#)
        #expect(sent.status == 202)
        try await server.drained()
        let id = try #require(sent.json["notification_id"] as? String)

        var seen: [String] = [], after: String?, pages = 0
        repeat {
            let page = await server.backend("GET", "/v1/notifications/\(id)?limit=10" + (after.map { "&after=\($0)" } ?? ""), nil)
            #expect(page.status == 200)
            let body = page.json
            let deliveries = try #require(body["deliveries"] as? [[String: Any]])
            #expect((body["summary"] as? [String: Int])?["delivered"] == 25, "the summary counts them all")
            seen += deliveries.compactMap { $0["token"] as? String }
            after = body["next"] as? String
            pages += 1
            #expect(deliveries.count == (after == nil ? 5 : 10))
        } while after != nil && pages < 10
        #expect(pages == 3)
        #expect(seen.count == 25 && Set(seen) == Set(tokens), "every delivery once, across the pages")

        let whole = await server.backend("GET", "/v1/notifications/\(id)", nil).json
        #expect((whole["deliveries"] as? [Any])?.count == 25 && whole["next"] == nil, "one page by default under 1,000")
        for bad in ["limit=0", "limit=10001", "limit=x", "after=-1", "after=x"] {
            let r = await server.backend("GET", "/v1/notifications/\(id)?\(bad)", nil)
            #expect(r.status == 400, "\(bad) → \(r.status) \(r.body)")
        }
    }
}
