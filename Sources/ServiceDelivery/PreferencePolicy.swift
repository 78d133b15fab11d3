import ServiceCore
import Store

/// Who is notified: a user's saved preferences against a notification's type.
extension AppConfig {
    /// Whether a user's saved values (absent keys are true) let `type` through.
    public func allows(_ type: String, preferences: [String: PreferenceValue]) -> Bool {
        guard preferences[AppConfig.masterKey]?.bool ?? true else { return false }
        guard let key = preferenceKey(for: type) else { return true }
        return preferences[key]?.bool ?? true
    }
}
