import ServiceCore
import ServiceDelivery
import ServiceHTTP

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
