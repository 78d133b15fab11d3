import Hummingbird
import ServiceCore
import Store

/// Who may do what: `GET /v1/api-key` tells a key what it may do (the console
/// shows only that), and `GET /v1/audit` (an `admin` key) lists who created,
/// cancelled or changed what, newest first, a page at a time.
package struct AccessRoutes: Sendable {
    let store: any DeliveryStore
    let auth: Auth

    package func register(on router: Router<ServiceContext>) {
        router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .read))
            .get("api-key", use: whoAmI)
        router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .admin))
            .get("audit", use: audit)
    }

    @Sendable func whoAmI(_ request: Request, context: ServiceContext) async throws -> Response {
        JSONResponse.ok(try context.requireKey().json)
    }

    @Sendable func audit(_ request: Request, context: ServiceContext) async throws -> Response {
        let query = request.uri.queryParameters
        let (limit, after) = try BackendRoutes.page(query)
        let page = try await store.auditEntries(limit: limit, before: after)
        return JSONResponse.ok(.object([("entries", .array(page.items.map(Self.json)))]
            + (page.next.map { [("next", JSON.string(String($0)))] } ?? [])))
    }

    static func json(_ e: AuditEntry) -> JSON {
        .object([
            ("at", Timestamp.json(e.at)),
            ("actor", .string(e.actor)),
            ("method", .string(e.method)),
            ("path", .string(e.path)),
            ("app_type", e.appType.map(JSON.string) ?? .null),
            ("target", e.target.map(JSON.string) ?? .null),
            ("status", .int(e.status)),
            ("remote_address", e.remoteAddress.map(JSON.string) ?? .null),
        ])
    }
}
