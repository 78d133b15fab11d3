import ServiceCore

extension APIKey {
    /// The idempotency scope: the name for a named key; for a bare key line, the
    /// secret's keyed hash, as before names existed, so that keys stored then still
    /// replay.
    func idempotencyScope(secret: String) -> String {
        named ? IdempotencyGate.scope(name: name) : IdempotencyGate.scope(secret)
    }
}

extension APIError {
    static func forbidden(_ message: String) -> APIError { APIError(status: .forbidden, message: message) }
}

extension ServiceContext {
    /// The API key the middleware accepted; a route behind it without one is a wiring bug.
    func requireKey() throws(APIError) -> APIKey {
        guard let apiKey else { throw .unauthorized("missing API key") }
        return apiKey
    }

    /// A 403 unless the request's API key may act for `appType`. Nothing has been
    /// read or changed yet when it is thrown.
    func authorize(app appType: String) throws(APIError) {
        let key = try requireKey()
        guard key.covers(app: appType) else {
            throw .forbidden("the API key '\(key.name)' may not act for app '\(appType)'")
        }
        audit.app = appType
    }

    /// A 403 unless the key covers every app (process-wide views).
    func authorizeAllApps() throws(APIError) {
        let key = try requireKey()
        guard key.apps == nil else {
            throw .forbidden("the API key '\(key.name)' is limited to some apps; this view covers every app")
        }
    }

    /// Whether the key covers `appType`, for filtering lists.
    func sees(app appType: String) -> Bool { apiKey?.covers(app: appType) ?? false }
}
