import Hummingbird
import NIOCore
import ServiceCore

/// The request context every route sees: Hummingbird's core, plus who is calling
/// (the user the JWT middleware verified, or the API key the key middleware
/// accepted), where from, and what the audit log is to record of the request.
package struct ServiceContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    var user: UserIdentity?
    var apiKey: APIKey?
    /// The request's `Idempotency-Key`, checked by `IdempotencyKeyMiddleware` on the
    /// routes that create work; nil without one (and on every other route).
    var idempotencyKey: String?
    /// The peer's IP address; nil where there is none (an in-process test).
    let remoteAddress: String?
    /// Filled by the routes as they learn it; read by `AuditMiddleware` once the
    /// route has answered (a reference: the route's copy of the context is not ours).
    let audit = AuditNote()

    package init(source: Source) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress?.ipAddress
    }

    /// The app routes run behind `UserAuthMiddleware`: a missing user is a wiring bug.
    func requireUser() throws -> UserIdentity {
        guard let user else { throw APIError.unauthorized("missing bearer token") }
        return user
    }
}
