import APNs
import ServiceCore
import Store

/// The body both `POST /api/user/device-token` and `POST /v1/users/{id}/device-tokens`
/// take (the seed's field names), checked before anything is stored.
package enum Registration {
    package static func parse(_ body: JSON, userID: String, companyID: String?, config: ServerConfig)
        throws(RequestError) -> DeviceRegistration
    {
        let normalized = try requiredToken(body, field: "deviceToken")
        guard let platform = body["platform"]?.stringValue, platform == "ios" || platform == "android" else {
            throw .invalid("platform must be \"ios\" or \"android\"")
        }
        guard let appType = body["appType"]?.stringValue else { throw .invalid("appType is required") }
        guard config.app(appType) != nil else {
            throw .invalid("unknown appType; configured: \(config.apps.map(\.appType).joined(separator: ", "))")
        }
        var environment = "production"
        if let env = body["environment"], !env.isNull {
            guard let e = env.stringValue, e == "sandbox" || e == "production" else {
                throw .invalid("environment must be \"sandbox\" or \"production\"")
            }
            environment = e
        }
        return DeviceRegistration(
            userID: userID, companyID: companyID, token: normalized, platform: platform, appType: appType,
            deviceName: try optionalText(body, "deviceName"), osVersion: try optionalText(body, "osVersion"),
            appVersion: try optionalText(body, "appVersion"), environment: environment)
    }

    /// Stores `devices`, all or none, each user keeping at most the configured number
    /// of active tokens per app. A token registered as a Live Activity token is a 409
    /// (one kind never becomes the other); with `listed`, the error names the entry.
    package static func store(_ devices: [DeviceRegistration], in store: any DeliveryStore, config: ServerConfig,
                      now: Int64, listed: Bool = false) async throws {
        let refusal = try await store.register(devices, maxActive: config.maxTokensPerUser, now: now)
        if let refusal {
            let entry = listed ? "devices[\(refusal.index)]: " : ""
            throw RequestError.conflict(entry + "deviceToken is registered as a Live Activity token")
        }
    }

    /// The token in `field`, normalized: a 400 naming the field when it is missing or
    /// not a token (device and Live Activity tokens alike).
    package static func requiredToken(_ body: JSON, field: String) throws(RequestError) -> String {
        guard let raw = body[field] else { throw .invalid("\(field) is required") }
        guard let text = raw.stringValue, let token = normalizeToken(text) else {
            throw .invalid("\(field) must be 64 to 200 hex digits (an even count)")
        }
        return token
    }

    /// The library's rule (`DeviceToken`: 64 to 200 hex digits, an even count, any
    /// case), as lower-case hex; nil otherwise. The API takes no white space around a
    /// token, which the library forgives in a file of tokens.
    static func normalizeToken(_ text: String) -> String? {
        guard let token = DeviceToken(text), token.hex.utf8.count == text.utf8.count else { return nil }
        return token.hex
    }

    /// An optional free-text field: a string of at most 256 bytes, or absent/null.
    static func optionalText(_ body: JSON, _ key: String) throws(RequestError) -> String? {
        guard let value = body[key], !value.isNull else { return nil }
        guard let s = value.stringValue, s.utf8.count <= 256 else {
            throw .invalid("\(key) must be a string of at most 256 bytes")
        }
        return s
    }

    /// A user or company id from a path or body: 1 to 256 bytes, no control characters.
    package static func isIdentifier(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 256 && s.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7f }
    }
}
