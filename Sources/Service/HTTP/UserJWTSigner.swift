import Foundation

/// Signs HS256 JWTs the way `UserJWTVerifier` reads them, with the config's secret
/// and its `user_jwt` audience and issuer: what `apns-server user-jwt` prints, for
/// trying the app-facing `/api/user/…` calls by hand.
struct UserJWTSigner: Sendable {
    let secret: [UInt8]
    var expected = UserJWTVerifier.Expected()

    /// `sub`, `exp` (`now + ttl` seconds), `iat`, `company_id` when given, and `aud`
    /// and `iss` when the config names them.
    func token(user: String, company: String?, now: Int64, ttl: Int64) -> String {
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

/// `apns-server user-jwt`: the command's work, so that the executable only parses.
public enum UserJWTCommand {
    /// A day at most: a token printed to a terminal should not outlive the session
    /// it is for.
    public static let maxTTL = 86_400
    public static let defaultTTL = 3_600

    /// The token for `user` (and `company`), signed with the config's secret, valid
    /// `ttl` seconds from `now`; or the one line saying why not.
    public static func token(configPath: String, user: String, company: String?, ttl: Int,
                             environment: [String: String], now: Int64) -> Result<String, UserJWTError> {
        guard Registration.isIdentifier(user) else {
            return .failure(UserJWTError("--user must be 1 to 256 characters without control characters"))
        }
        if let company, !Registration.isIdentifier(company) {
            return .failure(UserJWTError("--company must be 1 to 256 characters without control characters"))
        }
        guard (1...maxTTL).contains(ttl) else {
            return .failure(UserJWTError("--ttl must be 1 to \(maxTTL) seconds"))
        }
        let config: ServerConfig
        do { config = try ServerConfig.load(path: configPath, environment: environment) } catch {
            return .failure(UserJWTError(error.description))
        }
        let signer = UserJWTSigner(secret: config.userJWTSecret, expected: config.userJWTClaims)
        return .success(signer.token(user: user, company: company, now: now, ttl: Int64(ttl)))
    }
}

public struct UserJWTError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}
