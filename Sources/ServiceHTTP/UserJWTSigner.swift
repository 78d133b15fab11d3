import Foundation
import ServiceCore
import ServiceDelivery

/// Signs HS256 JWTs the way `UserJWTVerifier` reads them, with the config's secret
/// and its `user_jwt` audience and issuer: what `apns-server user-jwt` prints, for
/// trying the app-facing `/api/user/…` calls by hand.
package struct UserJWTSigner: Sendable {
    let secret: [UInt8]
    var expected = UserJWTClaims()

    package init(secret: [UInt8], expected: UserJWTClaims = UserJWTClaims()) {
        self.secret = secret
        self.expected = expected
    }

    /// `sub`, `exp` (`now + ttl` seconds), `iat`, `company_id` when given, and `aud`
    /// and `iss` when the config names them.
    package func token(user: String, company: String?, now: Int64, ttl: Int64) -> String {
        var claims: [(String, JSON)] = [("sub", .string(user))]
        if let company { claims.append(("company_id", .string(company))) }
        if let audience = expected.audience { claims.append(("aud", .string(audience))) }
        if let issuer = expected.issuer { claims.append(("iss", .string(issuer))) }
        claims.append(("iat", .int64(now)))
        claims.append(("exp", .int64(now + ttl)))
        let header = JSON.object([("alg", .string("HS256")), ("typ", .string("JWT"))])
        let input = Base64URL.encode(header.bytes) + "." + Base64URL.encode(JSON.object(claims).bytes)
        return input + "." + Base64URL.encode(HMACSHA256.mac(key: secret, Array(input.utf8)))
    }
}
