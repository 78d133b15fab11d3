import Foundation
import Hummingbird
import NIOCore
import HummingbirdTesting
import Synchronization
import Testing
import TestSupport
@testable import Service
@testable import ServiceCore
@testable import Store

/// The application as a value, driven through its router: no socket, no child
/// process, a real SQLite file, and a clock the test holds. Quiet hours decide on
/// that clock alone: the real time (whatever day this runs) never enters.
@Suite struct InProcessQuietHoursTests {
    /// `defer` in New York's quiet hours on the night the clocks spring forward: the
    /// delivery is held until 08:00 EDT (12:00 UTC, not 13:00 as EST would put it);
    /// once the clock says 09:00 EDT a new one is due at once. Errors keep the seed's
    /// shape byte for byte.
    @Test func deferredDeliveriesFollowTheInjectedClock() async throws {
        // The workers run beside the router: the delivery due at once goes to a mock.
        let mock = try Harness.mock(sandbox: false)
        defer { mock.stop() }
        var options = ServerProcess.Options()
        options.extraApps = Held.apps
        let files = ServerProcess(sandbox: nil, production: mock, options: options)
        let config = try ServerConfig.load(path: files.configPath, environment: [:])
        let store = try SQLiteStore(path: files.scratch.path("in-process.db"))
        // 23:00 EST on 7 March 2026.
        let clock = FakeClock(at: "2026-03-08T04:00:00Z")
        let app = try await buildApplication(configuration: config, dependencies: Dependencies(clock: clock, store: store))

        try await app.test(.router) { client in
            func call(_ method: HTTPRequest.Method, _ uri: String, _ body: String? = nil,
                      bearer: String = Harness.apiKey) async throws -> (status: Int, body: String) {
                var headers: HTTPFields = [.authorization: "Bearer \(bearer)"]
                if body != nil { headers[.contentType] = "application/json" }
                return try await client.execute(uri: uri, method: method, headers: headers,
                                                body: body.map { ByteBuffer(string: $0) }) { r in
                    (Int(r.status.code), String(buffer: r.body))
                }
            }
            let token = Harness.tokens(1, seed: 241)[0]
            let registered = try await call(.post, "/v1/users/ny/device-tokens",
                                            #"{"deviceToken":"\#(token)","platform":"ios","appType":"travel","environment":"production"}"#)
            #expect(registered.status == 200 && registered.body == #"{"success":true,"message":"Device token registered successfully"}"#,
                    "\(registered)")
            let saved = try await call(.put, "/api/user/push-preferences?appType=travel",
                                       #"{\#(QuietHoursTests.quiet2200to0800),"timeZone":"America/New_York"}"#,
                                       bearer: Harness.jwt(sub: "ny"))
            #expect(saved.status == 200, "\(saved)")

            func notBefore() async throws -> Any? {
                let posted = try await call(.post, "/v1/notifications",
                                            #"{"type":"message","app_type":"travel","user_ids":["ny"],"alert":{"title":"Trip","body":"b"}}"#)
                #expect(posted.status == 202, "\(posted)")
                let answer = try JSONSerialization.jsonObject(with: Data(posted.body.utf8)) as? [String: Any]
                let id = try #require(answer?["notification_id"] as? String, "\(posted)")
                let view = try await call(.get, "/v1/notifications/\(id)")
                let json = try JSONSerialization.jsonObject(with: Data(view.body.utf8)) as? [String: Any]
                let first = try #require((json?["deliveries"] as? [[String: Any]])?.first, "\(view)")
                return first["not_before"]
            }
            #expect(try await notBefore() as? String == "2026-03-08T12:00:00.000Z")
            clock.set("2026-03-08T13:00:00Z")
            #expect(try await notBefore() == nil, "09:00 EDT: out of quiet hours, due at once")

            let unknown = try await call(.get, "/v1/nothing-here")
            #expect(unknown.status == 404 && unknown.body == #"{"success":false,"error":"not found"}"#, "\(unknown)")
            let refused = try await call(.get, "/v1/notifications/x", bearer: "wrong-key")
            #expect(refused.status == 401 && refused.body.hasPrefix(#"{"success":false,"error":"#), "\(refused)")
        }
    }
}
