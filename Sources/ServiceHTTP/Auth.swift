import CServiceCrypto
import Foundation
import Hummingbird
import ServiceCore

/// Who is calling. Apps send the user's HS256 JWT (the seed's bearer token); the
/// backend sends an API key. Both arrive as `Authorization: Bearer …`.
package struct Auth: Sendable {
    /// Each key with its secret's HMAC under `comparisonKey`.
    let apiKeys: [(key: APIKey, digest: [UInt8])]
    let jwt: UserJWTVerifier
    /// A JWT's `exp` and `nbf` are checked against this clock's time.
    let clock: any ServiceClock
    /// Random per process: keys are compared as HMACs under it, so the comparison
    /// costs the same whatever a guess's length or its first wrong byte.
    private let comparisonKey: [UInt8]

    package init(apiKeys: [APIKeyFile.Entry], jwtSecret: [UInt8], jwtClaims: UserJWTClaims = .init(),
         clock: any ServiceClock) {
        self.clock = clock
        var key = [UInt8](repeating: 0, count: 32)
        for i in key.indices { key[i] = UInt8.random(in: 0...255) }
        comparisonKey = key
        jwt = UserJWTVerifier(secret: jwtSecret, expected: jwtClaims)
        self.apiKeys = apiKeys.map { ($0.key, HMACSHA256.mac(key: key, $0.secret)) }
    }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { x in
            b.withUnsafeBufferPointer { y in cservice_equal(x.baseAddress, y.baseAddress, x.count) == 1 }
        }
    }

    /// The bearer credential of a request, nil when there is none.
    static func bearer(_ request: Request) -> String? {
        guard let value = request.headers[.authorization] else { return nil }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let credential = parts[1].trimmingCharacters(in: .whitespaces)
        return credential.isEmpty ? nil : credential
    }

    /// The key whose secret is `credential`; nil for none.
    func apiKey(_ credential: String) -> APIKey? {
        let digest = HMACSHA256.mac(key: comparisonKey, Array(credential.utf8))
        // Every key is compared, so the time does not tell which one matched.
        var found: APIKey?
        for known in apiKeys where Auth.equal(known.digest, digest) { found = known.key }
        return found
    }

    func isAPIKey(_ credential: String) -> Bool { apiKey(credential) != nil }
}

/// The apps' user: `sub`, and the company the JWT names (optional).
struct UserIdentity: Sendable {
    let userID: String
    let companyID: String?
}

/// Verifies HS256 JWTs (RFC 7519): the algorithm is pinned (a token saying
/// `none`, or any other algorithm, is refused before anything else is read),
/// the signature is checked in constant time, `exp` is required, and `aud` and
/// `iss` must be the configured ones when the config names them.
struct UserJWTVerifier: Sendable {
    let secret: [UInt8]
    var expected = UserJWTClaims()

    enum Failure: Error, Equatable {
        case malformed, algorithm, signature, expired, missingExpiry, notYetValid, timeOutOfRange, missingSubject
        case audience, issuer
    }

    func verify(_ token: String, now: Int64) -> Result<UserIdentity, Failure> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        // The claims are read by the same strict parser as request bodies: a key given
        // twice, or U+0000 in a string (a `sub` of "alice\u0000x" stored as "alice"),
        // makes the token malformed.
        guard parts.count == 3, token.utf8.count <= 8192,
              let headerBytes = Base64URL.decode(parts[0]),
              let payloadBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let header = try? JSON.parse(headerBytes, maxDepth: 8),
              let claims = try? JSON.parse(payloadBytes, maxDepth: 8)
        else { return .failure(.malformed) }
        guard header["alg"]?.stringValue == "HS256" else { return .failure(.algorithm) }
        let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        let expected = HMACSHA256.mac(key: secret, signingInput)
        guard Auth.equal(expected, signature) else { return .failure(.signature) }

        guard case .object = claims else { return .failure(.malformed) }
        guard let exp = claims["exp"] else { return .failure(.missingExpiry) }
        guard let expiry = Self.seconds(exp) else { return .failure(.timeOutOfRange) }
        guard now < expiry else { return .failure(.expired) }
        if let nbf = claims["nbf"] {
            guard let notBefore = Self.seconds(nbf) else { return .failure(.timeOutOfRange) }
            guard now >= notBefore else { return .failure(.notYetValid) }
        }
        if let audience = self.expected.audience, !Self.names(claims["aud"], audience) {
            return .failure(.audience)
        }
        if let issuer = self.expected.issuer, claims["iss"]?.stringValue != issuer {
            return .failure(.issuer)
        }
        guard let sub = claims["sub"]?.stringValue, !sub.isEmpty, sub.utf8.count <= 256 else {
            return .failure(.missingSubject)
        }
        var company: String?
        switch claims["company_id"] {
        case .string(let s)? where !s.isEmpty: company = s
        case .number(let n)?: company = n  // some backends use integer ids
        default: company = nil
        }
        return .success(UserIdentity(userID: sub, companyID: company))
    }

    /// A NumericDate: seconds, possibly with a fraction; nil when it is not a number
    /// or lies outside what an Int64 holds (`1e300` is valid JSON, and converting it
    /// would trap).
    static func seconds(_ value: JSON) -> Int64? {
        guard case .number(let text) = value, let d = Double(text), d.isFinite else { return nil }
        let whole = d.rounded(.down)
        // -2^63 and 2^63 are exact doubles; Int64 holds [-2^63, 2^63).
        guard whole >= -0x1p63, whole < 0x1p63 else { return nil }
        return Int64(whole)
    }

    /// `aud` names `audience`: RFC 7519 allows one string or a list of them.
    static func names(_ aud: JSON?, _ audience: String) -> Bool {
        switch aud {
        case .string(let s)?: s == audience
        case .array(let items)?: items.contains { $0.stringValue == audience }
        default: false
        }
    }
}

enum Base64URL {
    /// Base64url without padding (as JWTs use); nil for anything else.
    static func decode(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for c in text.utf8 {
            let v: UInt32
            switch c {
            case 0x41...0x5A: v = UInt32(c - 0x41)
            case 0x61...0x7A: v = UInt32(c - 0x61 + 26)
            case 0x30...0x39: v = UInt32(c - 0x30 + 52)
            case UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "_"): v = 63
            default: return nil
            }
            buffer = buffer << 6 | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // A lone trailing character carries no whole byte: not base64. The bits left
        // over must be zero: otherwise four spellings would decode to the same bytes,
        // and a signature would verify whichever of them was sent.
        guard text.utf8.count % 4 != 1, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }

    static func encode(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)], table[Int(n & 63)]]
            i += 3
        }
        if bytes.count - i == 1 {
            let n = UInt32(bytes[i]) << 16
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)]]
        } else if bytes.count - i == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [table[Int(n >> 18 & 63)], table[Int(n >> 12 & 63)], table[Int(n >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// App routes: a valid user JWT, or 401.
struct UserAuthMiddleware: RouterMiddleware {
    typealias Context = ServiceContext
    let auth: Auth

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let token = Auth.bearer(request) else { throw APIError.unauthorized("missing bearer token") }
        switch auth.jwt.verify(token, now: auth.clock.nowSeconds) {
        case .success(let identity):
            var context = context
            context.user = identity
            context.audit.actor = "user:" + identity.userID
            return try await next(request, context)
        case .failure(let why):
            // The reason, never the token.
            context.logger.debug("user JWT refused", metadata: ["why": "\(why)"])
            throw APIError.unauthorized(why == .expired ? "token expired" : "invalid token")
        }
    }
}

/// Backend routes: one of the configured API keys (else 401) whose role allows the
/// group's `permission` (else 403). Which apps the key may act for each route checks
/// once it knows the app (`ServiceContext.authorize(app:)`).
struct APIKeyMiddleware: RouterMiddleware {
    typealias Context = ServiceContext
    let auth: Auth
    let permission: APIKey.Permission

    func handle(_ request: Request, context: Context,
                next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let credential = Auth.bearer(request) else { throw APIError.unauthorized("missing API key") }
        guard let key = auth.apiKey(credential) else { throw APIError.unauthorized("invalid API key") }
        var context = context
        context.apiKey = key
        context.audit.actor = key.name
        guard key.may(permission) else {
            throw APIError.forbidden("the API key '\(key.name)' (role \(key.role.rawValue)) may not \(Self.describe(permission))")
        }
        return try await next(request, context)
    }

    static func describe(_ permission: APIKey.Permission) -> String {
        switch permission {
        case .read: "read"
        case .testPush: "send a test push"
        case .send: "create or cancel work"
        case .admin: "read the audit log"
        }
    }
}
