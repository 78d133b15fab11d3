/// What each user saved for each app: toggles by notification type, quiet hours.
public protocol PreferenceStore: Sendable {
    /// The values this user saved for this app (keys never saved are absent).
    func preferences(userID: String, appType: String) async throws(StoreError) -> [String: PreferenceValue]

    /// Sets some keys, creating the record if there is none.
    func updatePreferences(userID: String, appType: String, _ changes: [String: PreferenceValue],
                           now: Int64) async throws(StoreError)
}

/// A saved preference: a toggle, or a text setting (a quiet-hours time, a time zone).
/// Literals of either kind read as one, so `["newEnquiry": false]` is a change.
public enum PreferenceValue: Sendable, Hashable, ExpressibleByBooleanLiteral, ExpressibleByStringLiteral {
    case bool(Bool)
    case text(String)

    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(stringLiteral value: String) { self = .text(value) }

    public var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var text: String? { if case .text(let t) = self { t } else { nil } }
}

extension PreferenceValue {
    /// A row's `value` (a toggle) or `text_value` (a setting): exactly one is set.
    init(value: Bool?, text: String?) {
        self = if let text { .text(text) } else { .bool(value ?? false) }
    }
}
