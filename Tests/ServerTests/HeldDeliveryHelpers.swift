import APNsMock
import Foundation
import Testing
import TestSupport

/// What the quiet-hours and batching tests share: a server with the group-travel
/// and field-service apps, and reading the log and the mock by apns-id.
enum Held {
    /// The group-travel app (quiet hours deferred; broadcasts are critical), the same
    /// app with quiet hours silent, and the field-service app (job updates batched
    /// in windows of 60 s).
    static let apps = apps(batchingWindow: 60)

    /// `apps`, with the field-service app's window `seconds` long: shorter for the
    /// tests on the real time, which wait for a window to close.
    static func apps(batchingWindow seconds: Int) -> [(appType: String, lines: String)] {
        [
            ("travel", """
                    preferences:
                      broadcast: broadcasts
                      message: messages
                    quiet_hours: defer
                    types:
                      broadcast: {critical: true}
                """),
            ("chill", """
                    preferences:
                      message: messages
                    quiet_hours: silent
                """),
            ("field", """
                    preferences:
                      taskUpdate: null
                      taskAssignment: null
                    types:
                      taskUpdate:
                        coalesce: {window_seconds: \(seconds), summary: "{count} updates on {entity_title}"}
                """),
        ]
    }

    /// A mock and the release binary, on the real time, its batching windows
    /// `batchingWindow` seconds long.
    static func start(batchingWindow: Int) async throws -> (MockServer, ServerProcess) {
        let mock = try Harness.mock(sandbox: false)
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = apps(batchingWindow: batchingWindow)
        let server = ServerProcess(sandbox: nil, production: mock, options: options)
        try await server.start()
        return (mock, server)
    }

    /// A mock and the application in process whose "now" is `clock`; `live`, on a
    /// port of its own (for a browser).
    static func start(_ clock: FakeClock, live: Bool = false) async throws -> (MockServer, InProcessServer) {
        let mock = try Harness.mock(sandbox: false)
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = apps
        let server = InProcessServer(sandbox: nil, production: mock, options: options, clock: clock, live: live)
        try await server.start()
        return (mock, server)
    }

    /// Registers `token` for `user` in `app`, and saves `preferences` (a JSON object) if given.
    static func user(_ server: any APIServer, _ user: String, token: String, app: String,
                     preferences: String? = nil) async {
        await BackendAPITests.register(server, user: user, token: token, app: app)
        if let preferences { await prefer(server, user, app: app, preferences) }
    }

    /// Saves `preferences` (a JSON object) for `user` in `app`.
    static func prefer(_ server: any APIServer, _ user: String, app: String, _ preferences: String) async {
        let r = await server.request("PUT", "/api/user/push-preferences?appType=\(app)", body: preferences,
                                     bearer: Harness.jwt(sub: user))
        #expect(r.status == 200, "\(r.body)")
    }

    /// Posts a notification (a JSON object's members, without braces); returns the
    /// apns-id of its first delivery (the tests target one device at a time) and
    /// the notification id.
    @discardableResult
    static func notify(_ server: any APIServer, _ members: String) async throws -> (apnsID: String, id: String) {
        let id = try await post(server, members)
        return (try await firstDelivery(server, id), id)
    }

    /// Posts a notification (as `notify`), and returns only its id: one request, for
    /// a test on the real time that must get on quickly.
    static func post(_ server: any APIServer, _ members: String) async throws -> String {
        let r = await server.backend("POST", "/v1/notifications", "{\(members)}")
        #expect(r.status == 202, "\(r.body)")
        return try #require(r.json["notification_id"] as? String, "\(r.body)")
    }

    /// The apns-id of a notification's first delivery.
    static func firstDelivery(_ server: any APIServer, _ notificationID: String) async throws -> String {
        let first = try #require(await deliveries(server, notificationID).first)
        return try #require(first["apns_id"] as? String)
    }

    static func deliveries(_ server: any APIServer, _ notificationID: String) async -> [[String: Any]] {
        (await server.backend("GET", "/v1/notifications/\(notificationID)").json["deliveries"] as? [[String: Any]]) ?? []
    }

    static func delivery(_ server: any APIServer, _ apnsID: String) async -> [String: Any] {
        await server.backend("GET", "/v1/deliveries?apns_id=\(apnsID)").json
    }

    /// Waits (on state, not time) until the delivery reaches `state`.
    @discardableResult
    static func wait(_ server: any APIServer, _ apnsID: String, state: String = "delivered",
                     timeout: TimeInterval = 60) async throws -> [String: Any] {
        let end = Date().addingTimeInterval(timeout)
        while true {
            let d = await delivery(server, apnsID)
            if d["state"] as? String == state { return d }
            guard Date() < end else {
                Issue.record("\(apnsID) never reached \(state): \(d)")
                throw WaitTimeout()
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    struct WaitTimeout: Error {}

    /// The requests the mock received with this apns-id.
    static func sent(_ mock: MockServer, _ apnsID: String) -> [RecordedRequest] {
        mock.recordedRequests().filter { $0.header("apns-id") == apnsID }
    }

    /// When the mock received the one request with this apns-id, in Unix milliseconds.
    static func sentAt(_ mock: MockServer, _ apnsID: String) throws -> Int64 {
        let requests = sent(mock, apnsID)
        try #require(requests.count == 1, "one request with apns-id \(apnsID), not \(requests.count)")
        return Instants.millis(received: requests[0].received)
    }

    /// The one request with this apns-id, as JSON (its `aps`, and the whole payload).
    static func sentPayload(_ mock: MockServer, _ apnsID: String) throws -> (aps: [String: Any], all: [String: Any]) {
        let requests = sent(mock, apnsID)
        try #require(requests.count == 1, "one request with apns-id \(apnsID), not \(requests.count)")
        let all = try #require(try JSONSerialization.jsonObject(with: Data(requests[0].body)) as? [String: Any])
        return (try #require(all["aps"] as? [String: Any]), all)
    }
}
