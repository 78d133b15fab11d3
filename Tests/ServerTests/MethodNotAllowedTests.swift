import Foundation
import Testing
import TestSupport

/// A method a path does not serve is 405 with `Allow` (the path's methods), in the
/// API's error shape; a path that does not exist stays 404.
@Suite struct MethodNotAllowedTests {
    @Test func wrongMethodIs405WithAllow() async throws {
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        let cases: [(method: String, path: String, allow: String)] = [
            ("TRACE", "/health", "GET"),
            ("POST", "/openapi.json", "GET"),
            ("PATCH", "/api/user/device-token", "DELETE, POST"),
            ("PUT", "/v1/users/staff-1/device-tokens", "GET, POST"),
            ("POST", "/v1/notifications/6f0b8c2e-3d1a-4b5c-9e7f-1a2b3c4d5e6f", "DELETE, GET"),
            ("PATCH", "/v1/channels/staff/trip/t-1", "DELETE, GET"),
        ]
        for c in cases {
            let r = await server.request(c.method, c.path, bearer: Harness.apiKey)
            #expect(r.status == 405, "\(c.method) \(c.path)")
            #expect(r.body == #"{"success":false,"error":"method not allowed"}"#, "\(c.method) \(c.path)")
            #expect(r.headers.first { $0.0.lowercased() == "allow" }?.1 == c.allow, "\(c.method) \(c.path)")
        }
        for path in ["/nothing-here", "/v1/users/staff-1", "/v1/notifications/a/b"] {
            let r = await server.request("GET", path, bearer: Harness.apiKey)
            #expect(r.status == 404, "\(path)")
            #expect(r.body == #"{"success":false,"error":"not found"}"#)
        }
    }
}
