import FoundationEssentials
import Synchronization

/// The provider JWT of one connection set: signed once, reused for every request,
/// refreshed after `refreshAge` (APNs refuses tokens older than an hour) or once
/// when APNs answers ExpiredProviderToken.
///
/// The generation counter stops a burst of ExpiredProviderToken answers (every
/// stream in flight gets one) from causing a burst of refreshes: only answers to
/// requests sent with the current generation refresh it. APNs throttles changes
/// more often than every 20 minutes (TooManyProviderTokenUpdates), which a
/// 50-minute age refresh stays far from.
///
/// With certificate credentials there is no token: `current` is generation 0,
/// which the lane never installs, so no authorization header is ever sent
/// (APNs uses the token and ignores the certificate when both come).
final class ProviderToken: Sendable {
    struct Current: Sendable {
        let jwt: String
        let generation: Int
        let issuedAt: Int64
    }

    static let refreshAge: Int64 = 50 * 60

    /// Nil with certificate credentials.
    private let token: Credentials.Token?
    private let state: Mutex<Current?> = Mutex(nil)
    private let signatures = Atomic<Int>(0)

    /// The owner hands each new generation to its transport (`Lane.submit`).
    init(credentials: Credentials) {
        if case .token(let token) = credentials { self.token = token } else { token = nil }
    }

    /// What certificate credentials use: no token, never installed (generation 0).
    static let none = Current(jwt: "", generation: 0, issuedAt: 0)

    /// JWT signatures made so far.
    var signatureCount: Int { signatures.load(ordering: .relaxed) }

    /// The token to use now, signing one if there is none or it is old.
    func current(now: Int64 = ProviderToken.unixNow()) throws(SigningKey.LoadError) -> Current {
        try update { current throws(SigningKey.LoadError) in
            if let current, now - current.issuedAt < ProviderToken.refreshAge { return nil }
            return now
        }
    }

    /// After ExpiredProviderToken on a request sent with `generation`: refresh once.
    func expired(generation: Int, now: Int64 = ProviderToken.unixNow()) throws(SigningKey.LoadError) -> Current {
        try update { current throws(SigningKey.LoadError) in
            if let current, current.generation != generation { return nil }
            return now
        }
    }

    /// `decide` returns the iat of a new token, or nil to keep the current one.
    private func update(_ decide: (Current?) throws(SigningKey.LoadError) -> Int64?) throws(SigningKey.LoadError) -> Current {
        guard let token else { return ProviderToken.none }
        let (result, fresh): (Current, Bool) = try state.withLock { (state: inout Current?) throws(SigningKey.LoadError) -> (Current, Bool) in
            guard let iat = try decide(state) else { return (state!, false) }
            let jwt = try token.key.sign(keyID: token.keyID, teamID: token.teamID, issuedAt: iat)
            let next = Current(jwt: jwt, generation: (state?.generation ?? 0) + 1, issuedAt: iat)
            state = next
            return (next, true)
        }
        if fresh { signatures.add(1, ordering: .relaxed) }
        return result
    }

    static func unixNow() -> Int64 { Int64(Date().timeIntervalSince1970) }
}
