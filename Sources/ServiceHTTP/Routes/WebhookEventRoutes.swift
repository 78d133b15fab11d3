import Hummingbird
import ServiceCore
import Store

/// `GET /v1/webhook-events[?state=pending|delivered|failed][&limit=N][&after=CURSOR]`
/// (an API key): the webhook events in the order they were written, a page at a
/// time like the log's deliveries; `?state=failed` lists those that never got
/// through (their receiver did not answer 2xx within `webhooks.retry_hours`).
package struct WebhookEventRoutes: Sendable {
    let store: any DeliveryStore
    let auth: Auth

    static let states: Set<String> = ["pending", "delivered", "failed"]

    package func register(on router: Router<ServiceContext>) {
        router.group("v1").add(middleware: APIKeyMiddleware(auth: auth, permission: .read)).get("webhook-events", use: list)
    }

    @Sendable func list(_ request: Request, context: ServiceContext) async throws -> Response {
        // The webhooks are the service's, not an app's: their events span every app.
        try context.authorizeAllApps()
        let query = request.uri.queryParameters
        var state: String?
        if let text = query["state"] {
            guard Self.states.contains(String(text)) else {
                throw APIError.badRequest("state must be pending, delivered or failed")
            }
            state = String(text)
        }
        let (limit, after) = try BackendRoutes.page(query)
        // One more than asked tells whether there is a next page.
        var page = try await store.webhookEvents(state: state, limit: limit + 1, after: after)
        var next: Int64?
        if page.count > limit {
            page.removeLast()
            next = page.last?.cursor
        }
        return JSONResponse.ok(Self.json(page, next: next))
    }

    static func json(_ page: [WebhookEventView], next: Int64?) -> JSON {
        .object([
            ("success", .bool(true)),
            ("events", .array(page.map(json))),
        ] + (next.map { [("next", JSON.string(String($0)))] } ?? []))
    }

    static func json(_ e: WebhookEventView) -> JSON {
        .object([
            ("id", .string(e.event.eventID)),
            ("type", .string(e.event.type)),
            // Without a user, password or query: any of them may be a secret.
            ("url", .string(WebhookDestination.redacted(e.event.endpoint))),
            ("state", .string(e.state)),
            ("attempts", .int(e.event.attempts)),
            ("last_status", e.lastStatus.map(JSON.int) ?? .null),
            ("last_error", e.lastError.map(JSON.string) ?? .null),
            ("created_at", Timestamp.json(e.event.createdAt)),
            ("next_attempt_at", e.state == "pending" ? Timestamp.json(e.availableAt) : .null),
            ("finished_at", Timestamp.json(e.finishedAt)),
            ("data", (try? JSON.parse(Array(e.event.data.utf8))) ?? .string(e.event.data)),
        ])
    }
}
