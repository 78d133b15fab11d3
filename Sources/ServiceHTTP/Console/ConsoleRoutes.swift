import HTTPTypes
import Hummingbird

/// The support console: three static files beside this one (console.html, console.js,
/// console.css), compiled into the binary (`EmbeddedAssets`: no bundle beside it,
/// nothing fetched from elsewhere), served at `/console`. The page is a sign-in form,
/// a look-up form and the view the script fills in from the backend API's answers;
/// text from the API is only ever set as text, never parsed as HTML. They hold no
/// data and no secret: every figure on the page comes from the backend API, with
/// the API key the engineer types, kept in the tab's sessionStorage and sent as
/// the bearer. So the pages need no credential, and the API answers a wrong key
/// with the same 401 it gives anyone.
package struct ConsoleRoutes: Sendable {
    package func register(on router: Router<ServiceContext>) {
        let page = Self.response(EmbeddedAssets.consoleHTML, type: "text/html; charset=utf-8")
        // "/console/" too: the router reads a path's parts, not its trailing slash.
        router.get("console") { _, _ in page }
        router.get("console/console.css") { _, _ in
            Self.response(EmbeddedAssets.consoleCSS, type: "text/css; charset=utf-8")
        }
        router.get("console/console.js") { _, _ in
            Self.response(EmbeddedAssets.consoleJS, type: "text/javascript; charset=utf-8")
        }
    }

    /// No inline script or style, nothing from another origin, never in a frame
    /// (clickjacking a page that sends pushes), no form that submits (the key is
    /// never in a URL), and no Referer carrying the page's address elsewhere.
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func response(_ text: String, type: String) -> Response {
        var headers: HTTPFields = [.contentType: type, .cacheControl: "no-cache"]
        headers[HTTPField.Name("Content-Security-Policy")!] = contentSecurityPolicy
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
