import Hummingbird

/// A request no route took, on a path that has routes for other methods: 405 with
/// `Allow` (RFC 9110 §15.5.6), not the 404 of a path that does not exist, so a
/// client learns that the path is right and the method is not.
///
/// Added to the router after every route: Hummingbird builds each route's responder
/// with the middleware added before it, and the not-found responder with all of
/// them, so this runs only for requests that matched no route.
package struct MethodNotAllowedMiddleware: RouterMiddleware {
    package typealias Context = ServiceContext
    /// Each route's path, split ("v1", "{id}"), and its methods.
    let paths: [(segments: [Substring], methods: [String])]

    package init(routes: [Router<ServiceContext>.RouteDescription]) {
        var methods: [String: [String]] = [:]
        var order: [String] = []
        for route in routes {
            let path = route.path.description
            if methods[path] == nil { order.append(path) }
            methods[path, default: []].append(route.method.rawValue)
        }
        paths = order.map { ($0.split(separator: "/"), methods[$0]!.sorted()) }
    }

    package func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        let segments = request.uri.path.split(separator: "/")
        var allowed: [String] = []
        for path in paths where Self.matches(path.segments, segments) { allowed += path.methods }
        guard !allowed.isEmpty else { return try await next(request, context) }
        var response = APIError(status: .methodNotAllowed, message: "method not allowed").response
        response.headers[.allow] = Array(Set(allowed)).sorted().joined(separator: ", ")
        return response
    }

    /// A route's segments against a request's: `{name}` takes any one segment.
    static func matches(_ route: [Substring], _ request: [Substring]) -> Bool {
        route.count == request.count && zip(route, request).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
    }
}
