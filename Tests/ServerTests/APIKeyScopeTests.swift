import Foundation
import Testing
import TestSupport

/// API keys with least privilege, on both stores: a key's role bounds what it may
/// do and its apps for which apps; a refused call is a 403 that changes nothing;
/// every creating, cancelling or token-changing call is in the audit log with the
/// key's name; idempotency keys follow a key's name across a rotated secret.
@Suite(.serverPostgres) struct APIKeyScopeTests {
    static let reader = "reader-secret-0123456789abcdef"
    static let staffSender = "staff-sender-secret-0123456789"
    static let staffSupport = "staff-support-secret-012345678"
    static let auditor = "auditor-secret-0123456789abcdef"

    /// The harness's bare key (an admin for every app), and four named keys.
    static func keys(_ files: ServerProcess) throws {
        let path = files.scratch.path("api-keys")
        try """
            # A bare key: admin, every app.
            \(Harness.apiKey)
            # name          role     apps   key
            reports         read     *      \(reader)
            staff-backend   send     staff  \(staffSender)
            staff-desk      support  staff  \(staffSupport)
            security        admin    *      \(auditor)

            """.write(toFile: path, atomically: true, encoding: .utf8)
    }

    static func call(_ server: any APIServer, _ key: String, _ method: String, _ path: String,
                     _ body: String? = nil, idempotencyKey: String? = nil) async -> HTTPResponse {
        await server.request(method, path, body: body, bearer: key,
                             headers: idempotencyKey.map { [("Idempotency-Key", $0)] } ?? [])
    }

    static func notify(_ app: String, user: String) -> String {
        #"{"type":"order_status_changed","app_type":"\#(app)","user_ids":["\#(user)"],"alert":{"title":"Ready","body":"Order 1"}}"#
    }

    static func forbidden(_ r: HTTPResponse, _ why: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.status == 403, "\(r.status) \(r.body)", sourceLocation: sourceLocation)
        #expect(r.json["success"] as? Bool == false, sourceLocation: sourceLocation)
        #expect((r.json["error"] as? String)?.contains(why) == true, "\(r.body)", sourceLocation: sourceLocation)
    }

    @Test(arguments: ServerStore.allCases)
    func aKeyActsOnlyWithinItsRoleAndApps(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        try await withClockedServer(store, production: production, clock: clock, prepare: Self.keys) { server in
            let t = Harness.tokens(2, seed: 4101)
            await BackendAPITests.register(server, user: "ana", token: t[0], app: "staff")
            await BackendAPITests.register(server, user: "ana", token: t[1], app: "customer")

            // What each key may do, as the console reads it.
            let who = await Self.call(server, Self.staffSender, "GET", "/v1/api-key")
            #expect(who.status == 200)
            #expect(who.body == #"{"name":"staff-backend","role":"send","apps":["staff"],"permissions":["read","send"]}"#)
            let bare = await Self.call(server, Harness.apiKey, "GET", "/v1/api-key")
            #expect(bare.json["role"] as? String == "admin")
            #expect(bare.json["apps"] as? String == "*")

            // A read key reads, and may neither send nor cancel.
            let customerSend = await Self.call(server, Harness.apiKey, "POST", "/v1/notifications",
                                               Self.notify("customer", user: "ana"))
            #expect(customerSend.status == 202, "\(customerSend.body)")
            let customerID = try #require(customerSend.json["notification_id"] as? String)
            try await server.drained()
            #expect(await Self.call(server, Self.reader, "GET", "/v1/notifications/\(customerID)").status == 200)
            Self.forbidden(await Self.call(server, Self.reader, "POST", "/v1/notifications",
                                           Self.notify("staff", user: "ana")), "may not create or cancel work")
            Self.forbidden(await Self.call(server, Self.reader, "POST", "/v1/users/bob/device-tokens",
                                           #"{"deviceToken":"\#(Harness.tokens(1, seed: 4102)[0])","platform":"ios","appType":"staff"}"#),
                           "may not create or cancel work")
            Self.forbidden(await Self.call(server, Self.reader, "GET", "/v1/audit"), "may not read the audit log")

            // A staff key cannot touch customer's notifications, devices or schedules.
            Self.forbidden(await Self.call(server, Self.staffSender, "POST", "/v1/notifications",
                                           Self.notify("customer", user: "ana")), "may not act for app 'customer'")
            Self.forbidden(await Self.call(server, Self.staffSender, "GET", "/v1/notifications/\(customerID)"),
                           "may not act for app 'customer'")
            Self.forbidden(await Self.call(server, Self.staffSender, "DELETE", "/v1/notifications/\(customerID)"),
                           "may not act for app 'customer'")
            let carl = Harness.tokens(1, seed: 4103)[0]
            Self.forbidden(await Self.call(server, Self.staffSender, "POST", "/v1/users/carl/device-tokens",
                                           #"{"deviceToken":"\#(carl)","platform":"ios","appType":"customer"}"#),
                           "may not act for app 'customer'")
            Self.forbidden(await Self.call(server, Self.staffSender, "POST", "/v1/device-tokens",
                                           #"{"devices":[{"user_id":"dan","deviceToken":"\#(Harness.tokens(1, seed: 4104)[0])","platform":"ios","appType":"staff"},{"user_id":"carl","deviceToken":"\#(carl)","platform":"ios","appType":"customer"}]}"#),
                           "may not act for app 'customer'")
            let sendAt = "2026-06-01T13:00:00Z"
            let scheduled = await Self.call(server, Harness.apiKey, "POST", "/v1/notifications",
                #"{"type":"order_status_changed","app_type":"customer","user_ids":["ana"],"alert":{"title":"Later","body":"b"},"send_at":"\#(sendAt)"}"#)
            #expect(scheduled.status == 202, "\(scheduled.body)")
            let scheduledID = try #require(scheduled.json["notification_id"] as? String)
            Self.forbidden(await Self.call(server, Self.staffSender, "DELETE", "/v1/notifications/\(scheduledID)"),
                           "may not act for app 'customer'")
            Self.forbidden(await Self.call(server, Self.staffSender, "POST", "/v1/notifications",
                #"{"type":"order_status_changed","app_type":"customer","user_ids":["ana"],"alert":{"title":"Later","body":"b"},"send_at":"\#(sendAt)"}"#),
                "may not act for app 'customer'")

            // Nothing changed: the schedule still waits, carl has no token, and the
            // customer notification went once (one delivery, before the refusals).
            let stillScheduled = await Self.call(server, Harness.apiKey, "GET", "/v1/notifications/\(scheduledID)")
            #expect(stillScheduled.json["state"] as? String == "scheduled", "\(stillScheduled.body)")
            let carlTokens = await Self.call(server, Harness.apiKey, "GET", "/v1/users/carl/device-tokens")
            #expect((carlTokens.json["tokens"] as? [Any])?.isEmpty == true, "\(carlTokens.body)")
            let danTokens = await Self.call(server, Harness.apiKey, "GET", "/v1/users/dan/device-tokens")
            #expect((danTokens.json["tokens"] as? [Any])?.isEmpty == true, "the bulk list is stored whole or not at all")
            #expect(production.recordedRequests().count == 1)

            // Within its app it works, and its lists show only its app.
            let staffSend = await Self.call(server, Self.staffSender, "POST", "/v1/notifications", Self.notify("staff", user: "ana"))
            #expect(staffSend.status == 202, "\(staffSend.body)")
            let anaTokens = await Self.call(server, Self.staffSender, "GET", "/v1/users/ana/device-tokens")
            #expect((anaTokens.json["tokens"] as? [[String: Any]])?.map { $0["app_type"] as? String } == ["staff"])
            try await server.drained()
            let recent = await Self.call(server, Self.staffSender, "GET", "/v1/notifications")
            let apps = (recent.json["notifications"] as? [[String: Any]])?.compactMap { $0["app_type"] as? String }
            #expect(apps == ["staff"], "\(recent.body)")
            Self.forbidden(await Self.call(server, Self.staffSender, "GET", "/v1/stats/deliveries"), "covers every app")

            // A support key sends a test push to its app's device only, and nothing else.
            let devices = await Self.call(server, Harness.apiKey, "GET", "/v1/users/ana/device-tokens")
            let ids = Dictionary(uniqueKeysWithValues: (devices.json["tokens"] as? [[String: Any]] ?? [])
                .map { ($0["app_type"] as? String ?? "", $0["id"] as? Int ?? 0) })
            let test = await Self.call(server, Self.staffSupport, "POST", "/v1/users/ana/test-push",
                                       #"{"device_id":\#(ids["staff"] ?? 0)}"#)
            #expect(test.status == 202, "\(test.body)")
            Self.forbidden(await Self.call(server, Self.staffSupport, "POST", "/v1/users/ana/test-push",
                                           #"{"device_id":\#(ids["customer"] ?? 0)}"#), "may not act for app 'customer'")
            Self.forbidden(await Self.call(server, Self.staffSupport, "POST", "/v1/notifications",
                                           Self.notify("staff", user: "ana")), "may not create or cancel work")
            Self.forbidden(await Self.call(server, Self.reader, "POST", "/v1/users/ana/test-push",
                                           #"{"device_id":\#(ids["staff"] ?? 0)}"#), "may not send a test push")

            // The audit log names each key, the refusals included, and only an admin reads it.
            let audit = await Self.call(server, Self.auditor, "GET", "/v1/audit?limit=100")
            #expect(audit.status == 200, "\(audit.body)")
            let entries = try #require(audit.json["entries"] as? [[String: Any]])
            func logged(_ actor: String, _ status: Int) -> [[String: Any]] {
                entries.filter { $0["actor"] as? String == actor && $0["status"] as? Int == status }
            }
            #expect(logged("staff-backend", 202).count == 1)
            #expect(logged("staff-backend", 403).count == 6)
            #expect(logged("reports", 403).count == 3, "the refused reads (GETs) are not changes")
            #expect(logged("staff-desk", 202).first?["path"] as? String == "/v1/users/ana/test-push")
            #expect(logged("staff-desk", 202).first?["app_type"] as? String == "staff")
            let created = try #require(logged("staff-backend", 202).first)
            #expect(created["method"] as? String == "POST")
            #expect(created["path"] as? String == "/v1/notifications")
            #expect(created["app_type"] as? String == "staff")
            #expect(created["target"] as? String == staffSend.json["notification_id"] as? String)
            // The bare key is named by a hash of it, never by the key itself.
            let bareName = try #require(bare.json["name"] as? String)
            #expect(bareName.hasPrefix("key-") && !audit.body.contains(Harness.apiKey))
            #expect(logged(bareName, 202).count == 2)
            #expect(!audit.body.contains("Order 1"), "no payload content")
        }
    }

    /// A rotated secret under the same name replays the name's idempotency keys; a
    /// different name does not.
    @Test(arguments: ServerStore.allCases)
    func idempotencyKeysFollowTheKeysName(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        let old = "rotating-secret-old-0123456789", new = "rotating-secret-new-0123456789"
        func keys(_ lines: String) -> (ServerProcess) throws -> Void {
            { files in
                try (Harness.apiKey + "\n" + lines + "\n").write(toFile: files.scratch.path("api-keys"),
                                                                 atomically: true, encoding: .utf8)
            }
        }
        var options = ServerProcess.Options()
        // One database for both servers: PostgreSQL's, or the first one's SQLite file, copied.
        if store == .postgres { options.database = try await ServerPostgresTrait.newDatabase() }
        let before = InProcessServer(sandbox: nil, production: production, options: options, clock: clock)
        try keys("billing  send  *  \(old)\nbilling-v2  send  *  \(new)")(before.files)
        try await before.start()
        await BackendAPITests.register(before, user: "ana", token: Harness.tokens(1, seed: 4105)[0])
        let sent = await Self.call(before, old, "POST", "/v1/notifications", Self.notify("staff", user: "ana"),
                                   idempotencyKey: "order-7")
        #expect(sent.status == 202, "\(sent.body)")
        let otherName = await Self.call(before, new, "POST", "/v1/notifications", Self.notify("staff", user: "ana"),
                                        idempotencyKey: "order-7")
        #expect(otherName.status == 202)
        #expect(otherName.json["notification_id"] as? String != sent.json["notification_id"] as? String,
                "another key's name has idempotency keys of its own")
        try await before.drained()
        await before.stop()

        // The secret rotated: `billing` now has the new one, and its retry replays.
        let after = InProcessServer(sandbox: nil, production: production, options: options, clock: clock)
        if store == .sqlite {
            try FileManager.default.createDirectory(atPath: (after.databasePath as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: before.databasePath + suffix) {
                try FileManager.default.copyItem(atPath: before.databasePath + suffix, toPath: after.databasePath + suffix)
            }
        }
        try keys("billing  send  *  \(new)")(after.files)
        try await after.start()
        let retried = await Self.call(after, new, "POST", "/v1/notifications", Self.notify("staff", user: "ana"),
                                      idempotencyKey: "order-7")
        await after.stop()
        #expect(retried.status == 202)
        #expect(retried.body == sent.body)
        #expect(retried.headers.contains { $0.0.lowercased() == "idempotent-replayed" && $0.1 == "true" })
        #expect(production.recordedRequests().count == 2, "the replay sent nothing")
    }
}

/// The audit log outlives a `kill -9`: every call answered before the kill is in
/// it after a restart, with its key's name, on both stores.
@Suite(.serverPostgres) struct AuditLogCrashTests {
    @Test(arguments: ServerStore.allCases)
    func everyAnsweredCallIsInTheAuditLogAfterAKill(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        var options = ServerProcess.Options()
        if store == .postgres { options.database = try await ServerPostgresTrait.newDatabase() }
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        try APIKeyScopeTests.keys(server)
        try await server.start()
        let t = Harness.tokens(3, seed: 4106)
        var created: [String] = []
        for (i, token) in t.enumerated() {
            let registered = await APIKeyScopeTests.call(server, APIKeyScopeTests.staffSender, "POST",
                "/v1/users/u\(i)/device-tokens", #"{"deviceToken":"\#(token)","platform":"ios","appType":"staff"}"#)
            #expect(registered.status == 200, "\(registered.body)")
            let sent = await APIKeyScopeTests.call(server, APIKeyScopeTests.staffSender, "POST", "/v1/notifications",
                                                   APIKeyScopeTests.notify("staff", user: "u\(i)"))
            #expect(sent.status == 202, "\(sent.body)")
            created.append(try #require(sent.json["notification_id"] as? String))
        }
        #expect(await server.stop(SIGKILL) == SIGKILL)
        try await server.start()
        defer { Task { await server.stop() } }
        let audit = await APIKeyScopeTests.call(server, APIKeyScopeTests.auditor, "GET", "/v1/audit")
        #expect(audit.status == 200, "\(audit.body)")
        let entries = try #require(audit.json["entries"] as? [[String: Any]])
        #expect(entries.count == 6)
        #expect(entries.allSatisfy { $0["actor"] as? String == "staff-backend" && $0["remote_address"] as? String == "127.0.0.1" })
        // Newest first: the last notification, then its user's registration.
        #expect(entries.compactMap { $0["target"] as? String } == created.reversed())
        #expect(entries.filter { $0["path"] as? String == "/v1/notifications" }.count == 3)
        #expect(entries.filter { ($0["path"] as? String)?.hasSuffix("/device-tokens") == true && $0["status"] as? Int == 200 }.count == 3)
    }
}
