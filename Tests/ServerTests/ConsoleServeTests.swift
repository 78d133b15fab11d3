import Foundation
import Testing
@testable import Service
@testable import ServiceCore
@testable import ServiceHTTP

/// The console's files as apns-server serves them: no credential needed for the
/// files (they hold no data), strict CSP and frame headers, nothing inline and
/// nothing from another origin, only the public API called; and with
/// `console: false` there is no console at all.
@Suite struct ConsoleServeTests {
    static let strictPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    @Test func theConsoleIsServedWithStrictHeaders() async throws {
        try await withServer(.sqlite) { server in
            for (path, type) in [("/console", "text/html; charset=utf-8"), ("/console/", "text/html; charset=utf-8"),
                                 ("/console/console.js", "text/javascript; charset=utf-8"),
                                 ("/console/console.css", "text/css; charset=utf-8")] {
                let r = await server.request("GET", path)
                #expect(r.status == 200, "\(path)")
                let headers = Dictionary(r.headers, uniquingKeysWith: { a, _ in a })
                #expect(headers["content-type"] == type, "\(path)")
                #expect(headers["content-security-policy"] == Self.strictPolicy, "\(path)")
                #expect(headers["x-frame-options"] == "DENY", "\(path)")
                #expect(headers["x-content-type-options"] == "nosniff", "\(path)")
                #expect(headers["referrer-policy"] == "no-referrer", "\(path)")
            }
            let page = await server.request("GET", "/console").body
            #expect(page.contains(#"<script src="/console/console.js" defer></script>"#))
            #expect(page.components(separatedBy: "<script").count == 2, "one script, and it is a file")
            #expect(!page.contains("<style") && !page.contains("style=")
                    && page.range(of: #" on[a-z]+="#, options: .regularExpression) == nil,
                    "no inline style or handler (the policy would refuse them)")
            #expect(!page.contains("://"), "nothing from another origin")
            let css = await server.request("GET", "/console/console.css").body
            #expect(!css.contains("://") && !css.contains("@import") && !css.contains("url("))
            let script = await server.request("GET", "/console/console.js").body
            #expect(script.components(separatedBy: "://").count == 2 && script.contains("http://www.w3.org/2000/svg"),
                    "the SVG namespace is the one address in the script, and nothing is fetched from it")
            #expect(!script.contains("innerHTML") && !script.contains("eval(") && !script.contains("localStorage"))
        }
    }

    /// The files in the source tree are what is served, byte for byte (less each file's
    /// last line break): the build embeds them as they are, whatever quotes, #s or
    /// backslashes they hold.
    @Test func theServedFilesAreTheSourceTreesFiles() async throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appending(path: "../../Sources/ServiceHTTP").standardized
        func file(_ path: String) throws -> String {
            let text = try String(contentsOf: sources.appending(path: path), encoding: .utf8)
            return text.hasSuffix("\n") ? String(text.dropLast()) : text
        }
        let files = try [("/console", "Console/console.html"), ("/console/console.js", "Console/console.js"),
                         ("/console/console.css", "Console/console.css")].map { ($0.0, try file($0.1)) }
        try await withServer(.sqlite) { server in
            for (route, text) in files {
                #expect(await server.request("GET", route).body == text, "\(route)")
            }
        }
        let document = try file("OpenAPI/openapi.json")
        #expect(OpenAPIDocument.text == document)
        #expect(OpenAPIDocument.text.contains(#"\\x20"#), "its JSON escapes stay as written")
    }

    /// Every route the script calls is the public API: without a key it is the
    /// API's own 401, never a 404 (a route that does not exist) or a 200.
    @Test func theConsoleCallsOnlyThePublicAPI() async throws {
        try await withServer(.sqlite) { server in
            let script = await server.request("GET", "/console/console.js").body
            var paths: Set<String> = []
            for part in script.components(separatedBy: "\"/v1/").dropFirst() {
                let path = "/v1/" + part.prefix { $0 != "\"" && $0 != "?" }
                paths.insert(path)
            }
            // "/v1/users/" + id + "/device-tokens" and the like: the user's routes below.
            #expect(paths == ["/v1/stats/deliveries", "/v1/users/", "/v1/notifications/", "/v1/deliveries",
                              "/v1/notifications", "/v1/deactivated-device-tokens", "/v1/scheduled-notifications",
                              "/v1/api-key"], "\(paths.sorted())")
            for path in paths.filter({ !$0.hasSuffix("/") }).sorted()
                + ["/v1/notifications/x", "/v1/users/x/device-tokens", "/v1/users/x/push-preferences", "/v1/users/x/deliveries"] {
                let r = await server.request("GET", path)
                #expect(r.status == 401 && r.body == #"{"success":false,"error":"missing API key"}"#, "\(path)")
            }
            let push = await server.request("POST", "/v1/users/x/test-push", body: "{}", bearer: "wrong")
            #expect(push.status == 401 && push.body == #"{"success":false,"error":"invalid API key"}"#)
        }
    }

    @Test func consoleFalseLeavesNoConsole() async throws {
        var options = ServerProcess.Options()
        options.extraTopLevel = "console: false"
        try await withServer(.sqlite, options: options) { server in
            for path in ["/console", "/console/", "/console/console.js", "/console/console.css"] {
                let r = await server.request("GET", path)
                #expect(r.status == 404, "\(path)")
                #expect(r.body == #"{"success":false,"error":"not found"}"#)
            }
            #expect(await server.backend("GET", "/v1/notifications").status == 200, "the API is still there")
        }
    }
}
