/// The `aud` and `iss` a token must carry (config `user_jwt`); nil: not checked.
/// Supabase's tokens, for one, say `"aud":"authenticated"` and their project's
/// auth URL as `iss`.
package struct UserJWTClaims: Sendable {
    package var audience: String?
    package var issuer: String?

    package init(audience: String? = nil, issuer: String? = nil) {
        self.audience = audience
        self.issuer = issuer
    }
}
