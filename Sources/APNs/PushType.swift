/// `apns-push-type`: required by current OS versions; decides the topic's suffix,
/// the payload limit and the priorities APNs accepts.
public enum PushType: String, Sendable, CaseIterable, Hashable {
    /// A notification the user sees: an alert, a sound or a badge.
    case alert
    /// A silent push that wakes the app to update content (`content-available`);
    /// priority 5 or 1 only.
    case background
    /// A VoIP call through PushKit (topic `<bundle id>.voip`); payloads up to 5120 bytes.
    case voip
    /// A watchOS complication update (topic `<bundle id>.complication`).
    case complication
    /// A File Provider extension's change signal (topic `<bundle id>.pushkit.fileprovider`).
    case fileprovider
    /// Tells a managed device to contact its mobile device management (MDM) server.
    case mdm

    /// A Live Activity start, update or end (topic `<bundle id>.push-type.liveactivity`):
    /// see `LiveActivity`.
    case liveactivity
    /// A location query for a Location Push Service extension (topic `<bundle id>.location-query`).
    case location
    /// A Push to Talk update (topic `<bundle id>.voip-ptt`).
    case pushtotalk
    /// A widget reload (topic `<bundle id>.push-type.widgets`): see `WidgetsPush`.
    case widgets
    /// A Control Center control reload (topic `<bundle id>.push-type.controls`).
    case controls

    /// A push to an accessory the app manages (topic `<bundle id>.push-type.accessory`).
    case accessory

    /// The suffix APNs wants on the app's bundle id for this push type.
    public var topicSuffix: String {
        switch self {
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .location: ".location-query"
        case .pushtotalk: ".voip-ptt"
        case .liveactivity: ".push-type.liveactivity"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        case .accessory: ".push-type.accessory"
        case .alert, .background, .mdm: ""
        }
    }

    /// Largest payload APNs accepts, in bytes of the JSON as sent.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }
}

/// `apns-priority`.
public enum Priority: Int, Sendable, CaseIterable, Hashable {
    /// Deliver now (10). Not allowed for background pushes.
    case immediate = 10
    /// Deliver when power allows (5); required for background pushes.
    case powerConsiderate = 5
    /// Lowest (1).
    case low = 1
}

/// `apns-expiration`.
public enum Expiration: Sendable, Hashable {
    /// Try once; if the device is offline, drop it (0).
    case immediately
    /// Store and retry until this UNIX time (seconds).
    case at(unixSeconds: Int64)

    var headerValue: Int64 {
        switch self {
        case .immediately: 0
        case .at(let seconds): seconds
        }
    }
}
