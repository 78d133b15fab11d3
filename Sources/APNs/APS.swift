/// The `aps` dictionary, typed: what Apple's documentation lists for it.
public struct APS: Sendable, Hashable {
    /// What the notification shows (`alert`); nil for a silent push.
    public var alert: Alert?
    /// The number on the app's icon (`badge`); 0 removes it, nil leaves it as it is.
    public var badge: Int?
    /// The sound played on delivery (`sound`); nil for none.
    public var sound: Sound?
    /// Groups notifications in Notification Center (`thread-id`).
    public var threadID: String?
    /// The app's notification category, which picks its actions (`category`).
    public var category: String?
    /// Background update (`content-available: 1`).
    public var contentAvailable: Bool
    /// Lets a notification service extension modify the content (`mutable-content: 1`).
    public var mutableContent: Bool
    /// The window or content to bring forward when the notification is opened
    /// (`target-content-id`).
    public var targetContentID: String?
    /// How insistently the system presents it (`interruption-level`).
    public var interruptionLevel: InterruptionLevel?
    /// 0 to 1: how the system sorts the app's notifications in a summary.
    public var relevanceScore: Double?
    /// The Focus filter criteria the notification is shown under (`filter-criteria`).
    public var filterCriteria: String?
    /// A Live Activity's keys (event, content-state, ...); send it with push type
    /// `liveactivity`. Its alert is the payload's when `alert` is nil.
    public var liveActivity: LiveActivity?

    /// An `aps` dictionary; only the keys given (and the flags set) are written.
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

    /// The `alert` dictionary: the text shown, given directly or as keys of the
    /// app's `Localizable.strings` with their arguments.
    public struct Alert: Sendable, Hashable {
        /// The title (`title`).
        public var title: String?
        /// A line under the title (`subtitle`).
        public var subtitle: String?
        /// The message (`body`).
        public var body: String?
        /// An image file in the app bundle shown while the app launches (`launch-image`).
        public var launchImage: String?
        /// A localization key for the title (`title-loc-key`).
        public var titleLocKey: String?
        /// The arguments of `titleLocKey`'s format (`title-loc-args`).
        public var titleLocArgs: [String]?
        /// A localization key for the subtitle (`subtitle-loc-key`).
        public var subtitleLocKey: String?
        /// The arguments of `subtitleLocKey`'s format (`subtitle-loc-args`).
        public var subtitleLocArgs: [String]?
        /// A localization key for the body (`loc-key`).
        public var locKey: String?
        /// The arguments of `locKey`'s format (`loc-args`).
        public var locArgs: [String]?

        /// An alert; only the keys given are written.
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

    /// The `sound` key: a plain sound name, or a critical alert's dictionary.
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

    /// `interruption-level`: how the system presents the notification.
    public enum InterruptionLevel: String, Sendable, Hashable {
        /// Added to the list without lighting the screen or playing a sound.
        case passive
        /// Presented at once, lighting the screen and playing a sound (the default).
        case active
        /// Presented at once, breaking through Focus (needs the Time Sensitive capability).
        case timeSensitive = "time-sensitive"
        /// Presented at once, past Focus and the mute switch (needs Apple's entitlement).
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
