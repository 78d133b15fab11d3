import Hummingbird

/// The request context every route sees: Hummingbird's core, plus the user the
/// JWT middleware verified (app routes only).
struct ServiceContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    var user: UserIdentity?

    init(source: Source) {
        coreContext = .init(source: source)
    }

    /// The app routes run behind `UserAuthMiddleware`: a missing user is a wiring bug.
    func requireUser() throws -> UserIdentity {
        guard let user else { throw APIError.unauthorized("missing bearer token") }
        return user
    }
}
