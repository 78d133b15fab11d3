/// The group-travel app's priorities (low, normal, high, critical), as the service
/// sends them: an APNs priority header and the alert's `interruption-level`.
/// - low: priority 5 (APNs may delay it to save power), `passive` (no sound, no
///   screen wake; it waits in the notification list);
/// - normal: priority 10, `active` (the system default, so not written);
/// - high: priority 10, `time-sensitive` (breaks through a Focus that allows it);
/// - critical: priority 10, `time-sensitive`, and quiet hours do not hold or silence
///   it. Not `critical`: that level needs Apple's critical-alerts entitlement, which
///   an app rarely has, and APNs would be asked for what the device then refuses.
enum NamedPriority: String, Sendable, CaseIterable {
    case low, normal, high, critical

    var apnsPriority: Int { self == .low ? 5 : 10 }

    /// Nil: the default (`active`), left out of the payload.
    var interruptionLevel: String? {
        switch self {
        case .low: "passive"
        case .normal: nil
        case .high, .critical: "time-sensitive"
        }
    }
}
