/// The `aps` dictionary, typed: what Apple's documentation lists for it.
public struct APS: Sendable, Hashable {
    public var alert: Alert?
    public var badge: Int?
    public var sound: Sound?
    public var threadID: String?
    public var category: String?
    /// Background update (`content-available: 1`).
    public var contentAvailable: Bool
    /// Lets a notification service extension modify the content (`mutable-content: 1`).
    public var mutableContent: Bool
    public var targetContentID: String?
    public var interruptionLevel: InterruptionLevel?
    /// 0 to 1: how the system sorts the app's notifications in a summary.
    public var relevanceScore: Double?
    public var filterCriteria: String?
    /// A Live Activity's keys (event, content-state, ...); send it with push type
    /// `liveactivity`. Its alert is the payload's when `alert` is nil.
    public var liveActivity: LiveActivity?

    public init(alert: Alert? = nil, badge: Int? = nil, sound: Sound? = nil, threadID: String? = nil,
                category: String? = nil, contentAvailable: Bool = false, mutableContent: Bool = false,
                targetContentID: String? = nil, interruptionLevel: InterruptionLevel? = nil,
                relevanceScore: Double? = nil, filterCriteria: String? = nil, liveActivity: LiveActivity? = nil) {
        self.alert = alert
        self.badge = badge
        self.sound = sound
        self.threadID = threadID
        self.category = category
        self.contentAvailable = contentAvailable
        self.mutableContent = mutableContent
        self.targetContentID = targetContentID
        self.interruptionLevel = interruptionLevel
        self.relevanceScore = relevanceScore
        self.filterCriteria = filterCriteria
        self.liveActivity = liveActivity
    }

    public struct Alert: Sendable, Hashable {
        public var title: String?
        public var subtitle: String?
        public var body: String?
        public var launchImage: String?
        public var titleLocKey: String?
        public var titleLocArgs: [String]?
        public var subtitleLocKey: String?
        public var subtitleLocArgs: [String]?
        public var locKey: String?
        public var locArgs: [String]?

        public init(title: String? = nil, subtitle: String? = nil, body: String? = nil,
                    launchImage: String? = nil, titleLocKey: String? = nil, titleLocArgs: [String]? = nil,
                    subtitleLocKey: String? = nil, subtitleLocArgs: [String]? = nil,
                    locKey: String? = nil, locArgs: [String]? = nil) {
            self.title = title
            self.subtitle = subtitle
            self.body = body
            self.launchImage = launchImage
            self.titleLocKey = titleLocKey
            self.titleLocArgs = titleLocArgs
            self.subtitleLocKey = subtitleLocKey
            self.subtitleLocArgs = subtitleLocArgs
            self.locKey = locKey
            self.locArgs = locArgs
        }

        var jsonValue: JSONValue {
            var o: [(String, JSONValue)] = []
            o.add("title", title)
            o.add("subtitle", subtitle)
            o.add("body", body)
            o.add("launch-image", launchImage)
            o.add("title-loc-key", titleLocKey)
            o.add("title-loc-args", titleLocArgs)
            o.add("subtitle-loc-key", subtitleLocKey)
            o.add("subtitle-loc-args", subtitleLocArgs)
            o.add("loc-key", locKey)
            o.add("loc-args", locArgs)
            return .object(o)
        }
    }

    public enum Sound: Sendable, Hashable {
        /// A sound file in the app bundle, or "default".
        case named(String)
        /// A critical alert sound, played even when muted (needs Apple's entitlement).
        case critical(name: String, volume: Double)

        var jsonValue: JSONValue {
            switch self {
            case .named(let name): .string(name)
            case .critical(let name, let volume):
                .object([("critical", .int(1)), ("name", .string(name)), ("volume", .double(volume))])
            }
        }
    }

    public enum InterruptionLevel: String, Sendable, Hashable {
        case passive, active
        case timeSensitive = "time-sensitive"
        case critical
    }

    var jsonValue: JSONValue {
        var o: [(String, JSONValue)] = []
        if let alert = alert ?? liveActivity?.alert { o.append(("alert", alert.jsonValue)) }
        if let badge { o.append(("badge", .int(badge))) }
        if let sound { o.append(("sound", sound.jsonValue)) }
        o.add("thread-id", threadID)
        o.add("category", category)
        if contentAvailable { o.append(("content-available", .int(1))) }
        if mutableContent { o.append(("mutable-content", .int(1))) }
        o.add("target-content-id", targetContentID)
        o.add("interruption-level", interruptionLevel?.rawValue)
        if let relevanceScore, liveActivity?.relevanceScore == nil {
            o.append(("relevance-score", .double(relevanceScore)))
        }
        o.add("filter-criteria", filterCriteria)
        if let liveActivity { o.append(contentsOf: liveActivity.apsMembers) }
        return .object(o)
    }
}

extension [(String, JSONValue)] {
    fileprivate mutating func add(_ key: String, _ value: String?) {
        if let value { append((key, .string(value))) }
    }

    fileprivate mutating func add(_ key: String, _ values: [String]?) {
        if let values { append((key, .array(values.map { .string($0) }))) }
    }
}
