import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// Broadcast channels in apns-server (issue #12): one per app, environment and
/// entity, created on the mock's management endpoint over real TLS (idempotent),
/// listed, read, deleted; broadcasts recorded before they are sent and logged
/// once with APNs' ids; APNs' refusals as JSON errors with the reason, storing nothing.
@Suite struct ChannelServerTests {
    /// An app "arena" whose channels are managed on the given mocks.
    static func server(production: MockServer?, sandbox: MockServer? = nil, management: MockServer? = nil,
                       options: ServerProcess.Options = ServerProcess.Options()) -> ServerProcess {
        ServerProcess(sandbox: sandbox, production: production,
                      options: arena(options, production: production, sandbox: sandbox, management: management))
    }

    /// The same, as the application in process.
    static func app(production: MockServer?, sandbox: MockServer? = nil, management: MockServer? = nil,
                    options: ServerProcess.Options = ServerProcess.Options()) -> InProcessServer {
        InProcessServer(sandbox: sandbox, production: production,
                        options: arena(options, production: production, sandbox: sandbox, management: management))
    }

    static func arena(_ options: ServerProcess.Options, production: MockServer?, sandbox: MockServer?,
                      management: MockServer?) -> ServerProcess.Options {
        var options = options
        var lines: [String] = []
        if let m = management ?? production { lines.append("    broadcast_management_endpoint: https://127.0.0.1:\(m.port)") }
        if let sandbox { lines.append("    broadcast_sandbox_management_endpoint: https://127.0.0.1:\(sandbox.port)") }
        options.extraApps.append(("arena", lines.joined(separator: "\n")))
        return options
    }

    static func create(_ server: any APIServer, _ entity: String, environment: String = "production",
                       policy: Int = 1) async -> HTTPResponse {
        await server.backend("POST", "/v1/channels",
                             #"{"app_type":"arena","entity_type":"match","entity_id":"\#(entity)","environment":"\#(environment)","storage_policy":\#(policy)}"#)
    }

    static func channelJSON(_ id: String, _ entity: String, created: String, environment: String = "production",
                            policy: Int = 1) -> String {
        #"{"channel_id":"\#(id)","app_type":"arena","environment":"\#(environment)","entity_type":"match","entity_id":"\#(entity)","storage_policy":\#(policy),"created_at":"\#(created)""#
    }

    /// Create twice (and twice at once): one channel on APNs per key. List, read,
    /// the app's lookup (only for an app it registered with), delete.
    @Test func channelsPerEntityAreCreatedOnceListedReadAndDeleted() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = Self.app(production: production)
        try await server.start()
        defer { Task { await server.stop() } }

        let first = await Self.create(server, "m1")
        #expect(first.status == 201, "\(first.body)")
        let id = try #require(first.json["channel_id"] as? String)
        let created = try #require(first.json["created_at"] as? String)
        #expect(first.body == Self.channelJSON(id, "m1", created: created) + #","created":true}"#)
        let again = await Self.create(server, "m1")
        #expect(again.status == 200)
        #expect(again.body == Self.channelJSON(id, "m1", created: created) + #","created":false}"#)
        #expect(production.statistics().channelsCreated == 1, "the same key answers the channel it has")

        async let a = Self.create(server, "m2")
        async let b = Self.create(server, "m2")
        let (ra, rb) = await (a, b)
        #expect(Set([ra.status, rb.status]) == [201, 200])
        #expect(ra.json["channel_id"] as? String == rb.json["channel_id"] as? String)
        #expect(production.statistics().channelsCreated == 2)
        #expect(production.statistics().channelsCurrent == 2)

        let list = await server.backend("GET", "/v1/channels?app_type=arena")
        #expect(list.status == 200)
        let channels = try #require(list.json["channels"] as? [[String: Any]])
        #expect(channels.map { $0["entity_id"] as? String } == ["m1", "m2"])
        #expect(list.body.hasPrefix(#"{"channels":["# + Self.channelJSON(id, "m1", created: created) + "},"))
        #expect(await server.backend("GET", "/v1/channels?app_type=arena&environment=sandbox").body == #"{"channels":[]}"#)
        let read = await server.backend("GET", "/v1/channels/arena/match/m1")
        #expect(read.status == 200 && read.body == Self.channelJSON(id, "m1", created: created) + "}")
        let missing = await server.backend("GET", "/v1/channels/arena/match/nope")
        #expect(missing.status == 404 && missing.body == #"{"success":false,"error":"channel not found"}"#)

        // The app: only a user the backend named (see `anAppUserReadsOnlyTheChannelsTheBackendOpenedToThem`).
        let path = "/api/user/live-activity-channel?appType=arena&entityType=match&entityId=m1"
        let stranger = await server.request("GET", path, bearer: Harness.jwt(sub: "fan"))
        #expect(stranger.status == 404 && stranger.body == #"{"success":false,"error":"channel not found"}"#)
        let named = await server.backend("POST", "/v1/channels",
                                         #"{"app_type":"arena","entity_type":"match","entity_id":"m1","audience":{"users":["fan"]}}"#)
        #expect(named.status == 200 && named.body == Self.channelJSON(id, "m1", created: created) + #","created":false}"#)
        let lookup = await server.request("GET", path, bearer: Harness.jwt(sub: "fan"))
        #expect(lookup.status == 200 && lookup.body == #"{"success":true,"channelId":"\#(id)"}"#)
        let otherApp = await server.request("GET", path.replacingOccurrences(of: "arena", with: "customer"),
                                            bearer: Harness.jwt(sub: "fan"))
        #expect(otherApp.status == 404, "another app's entity of that name has no channel")
        let unknown = await server.request("GET", path.replacingOccurrences(of: "m1", with: "m9"), bearer: Harness.jwt(sub: "fan"))
        #expect(unknown.status == 404 && unknown.body == #"{"success":false,"error":"channel not found"}"#)
        #expect(await server.request("GET", path).status == 401)
        #expect(await server.request("GET", "/v1/channels?app_type=arena", bearer: Harness.jwt(sub: "fan")).status == 401)

        // Delete: on APNs, then in the store.
        let deleted = await server.backend("DELETE", "/v1/channels/arena/match/m1")
        #expect(deleted.status == 200)
        #expect(deleted.body == #"{"deleted":true,"# + Self.channelJSON(id, "m1", created: created).dropFirst() + "}")
        #expect(production.statistics().channelsDeleted == 1 && production.statistics().channelsCurrent == 1)
        #expect(await server.backend("GET", "/v1/channels/arena/match/m1").status == 404)
        #expect(await server.backend("DELETE", "/v1/channels/arena/match/m1").status == 404)

        // Bad requests.
        let bad: [(String, String)] = [
            (#"{"entity_type":"match","entity_id":"m"}"#, "app_type is required"),
            (#"{"app_type":"nope","entity_type":"match","entity_id":"m"}"#, "unknown app_type 'nope'"),
            (#"{"app_type":"arena","entity_id":"m"}"#, "entity_type is required (1 to 256 characters)"),
            (#"{"app_type":"arena","entity_type":"match"}"#, "entity_id is required (1 to 256 characters)"),
            (#"{"app_type":"arena","entity_type":"match","entity_id":"m","environment":"dev"}"#, #"environment must be \"sandbox\" or \"production\""#),
            (#"{"app_type":"arena","entity_type":"match","entity_id":"m","storage_policy":2}"#, "storage_policy must be 0 (no message stored) or 1 (the most recent stored)"),
        ]
        for (body, message) in bad {
            let r = await server.backend("POST", "/v1/channels", body)
            #expect(r.status == 400 && r.body == #"{"success":false,"error":"\#(message)"}"#, "\(body): \(r.body)")
        }
        #expect(production.statistics().channelsCreated == 2)
    }

    /// The app's lookup answers only a user the backend put in the channel's audience
    /// (`audience` when it creates it, again to change it): public, the users named, or
    /// the company in the user's JWT. A channel that is not the user's answers exactly
    /// as one that does not exist.
    @Test func anAppUserReadsOnlyTheChannelsTheBackendOpenedToThem() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = Self.app(production: production)
        try await server.start()
        defer { Task { await server.stop() } }

        func create(_ entity: String, _ audience: String?) async throws -> String {
            let field = audience.map { #","audience":\#($0)"# } ?? ""
            let r = await server.backend("POST", "/v1/channels",
                                         #"{"app_type":"arena","entity_type":"match","entity_id":"\#(entity)"\#(field)}"#)
            #expect(r.status == 201, "\(r.body)")
            return try #require(r.json["channel_id"] as? String)
        }
        _ = try await create("private", nil)
        let team = try await create("team", #"{"users":["ana"],"company_id":"c1"}"#)
        let open = try await create("open", #"{"public":true}"#)

        func lookup(_ entity: String, _ user: String, company: String? = nil) async -> HTTPResponse {
            await server.request("GET", "/api/user/live-activity-channel?appType=arena&entityType=match&entityId=\(entity)",
                                 bearer: Harness.jwt(sub: user, companyID: company))
        }
        let missing = await lookup("nothing-here", "ana")
        #expect(missing.status == 404 && missing.body == #"{"success":false,"error":"channel not found"}"#)
        for (entity, user, company) in [("private", "ana", "c1"), ("team", "cy", "c2"), ("team", "dee", nil)] {
            let r = await lookup(entity, user, company: company)
            #expect(r.status == missing.status && r.body == missing.body, "\(entity) for \(user)")
        }
        for (entity, user, company, id) in [("team", "ana", nil, team), ("team", "bo", "c1", team),
                                            ("open", "anyone", nil, open)] as [(String, String, String?, String)] {
            let r = await lookup(entity, user, company: company)
            #expect(r.status == 200 && r.body == #"{"success":true,"channelId":"\#(id)"}"#, "\(entity) for \(user)")
        }

        // Created again with another audience: the same channel, its audience replaced.
        let again = await server.backend("POST", "/v1/channels",
                                         #"{"app_type":"arena","entity_type":"match","entity_id":"team","audience":{"users":["cy"]}}"#)
        #expect(again.status == 200 && again.json["channel_id"] as? String == team)
        #expect(await lookup("team", "cy").status == 200)
        #expect(await lookup("team", "ana").status == 404)
        // Without one (a retried create): unchanged.
        #expect(await server.backend("POST", "/v1/channels",
                                     #"{"app_type":"arena","entity_type":"match","entity_id":"team"}"#).status == 200)
        #expect(await lookup("team", "cy").status == 200)

        let usage = #"audience must be {\"public\": true} or {\"users\": [user ids], \"company_id\": \"id\"}"#
        for (audience, message) in [
            ("[]", usage), (#"{"everyone":true}"#, usage),
            (#"{"public":"yes"}"#, "audience.public must be true or false"),
            (#"{"users":"ana"}"#, "audience.users must be a list of at most 10000 user ids"),
            (#"{"users":[7]}"#, "audience.users must hold user ids (1 to 256 characters)"),
            (#"{"company_id":""}"#, "audience.company_id must be a company id (1 to 256 characters)"),
            (#"{"public":true,"users":["ana"]}"#, "audience: a public channel names no users or company"),
        ] {
            let r = await server.backend("POST", "/v1/channels",
                                         #"{"app_type":"arena","entity_type":"match","entity_id":"bad","audience":\#(audience)}"#)
            #expect(r.status == 400 && r.body == #"{"success":false,"error":"\#(message)"}"#, "\(audience): \(r.body)")
        }
        #expect(production.statistics().channelsCreated == 3, "a bad audience creates nothing")
    }

    /// APNs' refusals: the 10,000-channel limit (here 1), an app without the
    /// capability: 502 with the reason, nothing stored.
    @Test func apnsRefusalsAreJSONErrorsWithTheReason() async throws {
        let production = try Harness.mock(sandbox: false) { $0.channelLimit = 1 }
        defer { production.stop() }
        let disabled = try Harness.mock(sandbox: false) { $0.broadcastEnabled = false }
        defer { disabled.stop() }
        var options = ServerProcess.Options()
        options.extraApps = [("closed", "    broadcast_management_endpoint: https://127.0.0.1:\(disabled.port)")]
        let server = Self.app(production: production, options: options)
        try await server.start()
        defer { Task { await server.stop() } }

        #expect(await Self.create(server, "m1").status == 201)
        let full = await Self.create(server, "m2")
        #expect(full.status == 502)
        #expect(full.body == #"{"success":false,"error":"APNs refused to create the channel: CannotCreateChannelConfig","reason":"CannotCreateChannelConfig","apns_status":400}"#)
        let list = await server.backend("GET", "/v1/channels?app_type=arena").json["channels"] as? [[String: Any]]
        #expect(list?.count == 1, "nothing stored for the refused one")

        let closed = await server.backend("POST", "/v1/channels", #"{"app_type":"closed","entity_type":"match","entity_id":"m1"}"#)
        #expect(closed.status == 502)
        #expect(closed.body == #"{"success":false,"error":"APNs refused to create the channel: FeatureNotEnabled","reason":"FeatureNotEnabled","apns_status":400}"#)
        #expect(await server.backend("GET", "/v1/channels?app_type=closed").body == #"{"channels":[]}"#)
    }

    /// A broadcast: 202 once recorded, then one request to APNs with the broadcast
    /// headers, and one final entry with apns-request-id and apns-unique-id (a
    /// development mock sends the latter). A channel APNs does not know: failed,
    /// ChannelNotRegistered, once.
    @Test func aBroadcastIsLoggedWithItsIDs() async throws {
        let sandbox = try Harness.mock(sandbox: true)
        defer { sandbox.stop() }
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = Self.app(production: production, sandbox: sandbox)
        try await server.start()
        defer { Task { await server.stop() } }
        let made = await Self.create(server, "final", environment: "sandbox", policy: 0)
        #expect(made.status == 201)
        let channel = try #require(made.json["channel_id"] as? String)
        #expect(sandbox.statistics().channelsCreated == 1 && production.statistics().channelsCreated == 0)

        let path = "/v1/channels/arena/match/final/broadcasts"
        let r = await server.backend("POST", path,
            #"{"environment":"sandbox","event":"update","content_state":{"score":"2-1"},"timestamp":1790000000,"alert":{"title":"Goal","body":"2-1"}}"#)
        #expect(r.status == 202, "\(r.body)")
        let id = try #require(r.json["broadcast_id"] as? String)
        #expect(r.body == #"{"broadcast_id":"\#(id)","channel_id":"\#(channel)"}"#)
        let log = try await Self.final(server, id)
        let sent = sandbox.recordedRequests().filter { $0.path.hasPrefix("/4/") }
        #expect(sent.count == 1)
        let request = try #require(sent.first)
        #expect(request.path == "/4/broadcasts/apps/\(Harness.pki.topic)")
        #expect(request.header("apns-channel-id") == channel)
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-expiration") == "0")
        #expect(String(decoding: request.body, as: UTF8.self) == #"{"aps":{"alert":{"title":"Goal","body":"2-1"},"timestamp":1790000000,"event":"update","content-state":{"score":"2-1"}}}"#)
        #expect(log["state"] as? String == "delivered" && log["status"] as? Int == 200 && log["reason"] is NSNull)
        #expect(log["apns_request_id"] as? String == request.header("apns-request-id"))
        let unique = try #require(log["apns_unique_id"] as? String)
        #expect(!unique.isEmpty)
        #expect(log["attempts"] as? Int == 1 && log["channel_id"] as? String == channel)

        // Refused before anything is stored.
        let bad: [(String, Int, String)] = [
            (#"{"environment":"sandbox","event":"start","content_state":{}}"#, 400, "event must be update or end (a broadcast cannot start an activity)"),
            (#"{"environment":"sandbox","event":"update"}"#, 400, "a Live Activity update needs aps.content-state"),
            (#"{"environment":"sandbox","event":"update","content_state":{},"expiration":1790000000}"#, 400, "this channel stores no message: expiration must be 0"),
            (#"{"environment":"sandbox","event":"update","content_state":{},"priority":7}"#, 400, "priority must be 10, 5 or 1"),
            (#"{"event":"update","content_state":{}}"#, 404, "channel not found"),
        ]
        for (body, status, message) in bad {
            let b = await server.backend("POST", path, body)
            #expect(b.status == status && b.body == #"{"success":false,"error":"\#(message)"}"#, "\(body): \(b.body)")
        }
        #expect(await server.backend("GET", "/v1/broadcasts/nope").status == 404)

        // A channel the store has and APNs does not: one final entry, the reason kept.
        let store = try server.store()
        let ghost = try await store.addChannel(ChannelRow(
            key: ChannelKey(appType: "arena", environment: "production", entityType: "match", entityID: "ghost"),
            channelID: "c29tZUNoYW5uZWw=", storagePolicy: 1, createdAt: 1), audience: nil)
        #expect(ghost.channelID == "c29tZUNoYW5uZWw=")
        let g = await server.backend("POST", "/v1/channels/arena/match/ghost/broadcasts", #"{"event":"end","content_state":{}}"#)
        #expect(g.status == 202)
        let ghostLog = try await Self.final(server, try #require(g.json["broadcast_id"] as? String))
        #expect(ghostLog["state"] as? String == "failed" && ghostLog["status"] as? Int == 400)
        #expect(ghostLog["reason"] as? String == "ChannelNotRegistered" && ghostLog["attempts"] as? Int == 1)
        #expect(production.recordedRequests().filter { $0.path.hasPrefix("/4/") }.count == 1)
    }

    /// A management endpoint must be TLS, like every endpoint: one line, exit 2.
    @Test func aPlainHTTPManagementEndpointStopsTheStart() async throws {
        let server = Self.server(production: nil, options: {
            var o = ServerProcess.Options()
            o.extraApps = [("plain", "    broadcast_management_endpoint: http://127.0.0.1:2196")]
            return o
        }())
        let path = try ConfigTests.config(server, [])
        let r = await ConfigTests.run(["--config", path])
        #expect(r.status == 2)
        #expect(r.stderr == "apns-server: config: apps[2].broadcast_management_endpoint must be https://HOST:PORT (TLS is always on), not 'http://127.0.0.1:2196'\n")
    }

    /// Waits until the broadcast's entry is final (a state that stays).
    static func final(_ server: any APIServer, _ id: String) async throws -> [String: Any] {
        let end = Date().addingTimeInterval(60)
        while Date() < end {
            let r = await server.backend("GET", "/v1/broadcasts/\(id)")
            #expect(r.status == 200)
            if r.json["state"] as? String != "pending" { return r.json }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("broadcast \(id) still pending")
        return [:]
    }
}

/// A broadcast recorded and claimed by a process that then died (kill -9): the
/// restarted server sends it once its lease runs out, once, and logs it once.
@Suite(.serialized) struct ChannelDurabilityTests {
    @Test func pendingBroadcastIsSentOnceAfterRestart() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = ChannelServerTests.server(production: production)
        try await server.start()
        #expect(await ChannelServerTests.create(server, "crash").status == 201)
        #expect(await server.stop(SIGKILL) == SIGKILL)

        // What the API and the worker had written when the process died: the row,
        // and a claim on it by a worker that will never answer.
        let store = try server.store()
        let channel = try #require(try await store.channel(
            ChannelKey(appType: "arena", environment: "production", entityType: "match", entityID: "crash")))
        let payload = Array(#"{"aps":{"timestamp":1790000000,"event":"update","content-state":{"n":1}}}"#.utf8)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await store.enqueueBroadcast(NewBroadcast(id: "crash-1", channel: channel, payload: payload, priority: 5,
                                                      expiration: 0), now: now)
        let claimed = try await store.claimBroadcasts(worker: "dead", limit: 10, leaseMillis: 1500, now: now)
        #expect(claimed.map(\.broadcast.id) == ["crash-1"])
        #expect(try await store.pendingBroadcasts() == 1)

        try await server.start()
        defer { Task { await server.stop() } }
        let log = try await ChannelServerTests.final(server, "crash-1")
        #expect(log["state"] as? String == "delivered" && log["attempts"] as? Int == 1)
        let sent = production.recordedRequests().filter { $0.path.hasPrefix("/4/") }
        #expect(sent.count == 1, "sent once")
        #expect(sent.first?.header("apns-request-id") == log["apns_request_id"] as? String)
        #expect(sent.first?.header("apns-priority") == "5")
        #expect(sent.first?.body == payload)
        #expect(try await store.pendingBroadcasts() == 0)
        // The dead worker's late answer changes nothing.
        #expect(try await !store.finishBroadcast(worker: "dead", BroadcastOutcome(
            id: "crash-1", delivered: false, status: 0, reason: "Late", requestID: nil, uniqueID: nil, attempts: 1),
            now: now))
    }
}
