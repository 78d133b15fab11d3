/// The recipients of a notification, folded from rows: devices and saved
/// preferences, each row naming its user. Both engines read the rows with their
/// own statements and fold them here.
///
/// Named users come in the order given, each once, device or not (so the service
/// can count "no_devices"). A company's users come as their device rows do, a
/// user's rows side by side: no list of 100k user ids to look each up in.
struct RecipientsFold {
    private var recipients: [Recipient]
    /// Named users' devices, by user, until `result` places them.
    private var devicesOf: [String: [Recipient.Device]] = [:]
    private var preferences: [String: [String: PreferenceValue]] = [:]

    /// Named users: `users`, in order, each once.
    init(users: [String]) {
        var seen = Set<String>()
        recipients = users.filter { seen.insert($0).inserted }
            .map { Recipient(userID: $0, preferences: [:], devices: []) }
    }

    /// A company's users, found in its device rows (`companyDevice`).
    init() {
        recipients = []
    }

    /// The users, in order; empty when there is no one to read rows for.
    var users: [String] { recipients.map(\.userID) }
    var isEmpty: Bool { recipients.isEmpty }

    /// A named user's active iOS token: user_id, id, token, environment.
    mutating func device(_ row: some StoreRow) throws {
        devicesOf[try row.string(0), default: []].append(try Self.device(row))
    }

    /// A company's active token (any platform): user_id, id, token, environment, is
    /// iOS; a user's rows side by side. An Android-only user stays a recipient with
    /// no iOS device: "no_devices".
    mutating func companyDevice(_ row: some StoreRow) throws {
        let userID = try row.string(0)
        if recipients.last?.userID != userID {
            recipients.append(Recipient(userID: userID, preferences: [:], devices: []))
        }
        if try row.bool(4) {
            recipients[recipients.count - 1].devices.append(try Self.device(row))
        }
    }

    /// A saved preference: user_id, key, value, text_value. A row seen twice (a
    /// join with a user's two devices) sets the same value twice.
    mutating func preference(_ row: some StoreRow) throws {
        preferences[try row.string(0), default: [:]][try row.string(1)] =
            PreferenceValue(value: try row.optionalBool(2), text: try row.optionalString(3))
    }

    consuming func result() -> [Recipient] {
        guard !devicesOf.isEmpty || !preferences.isEmpty else { return recipients }
        for i in recipients.indices {
            let userID = recipients[i].userID
            if let devices = devicesOf[userID] { recipients[i].devices = devices }
            if let saved = preferences[userID] { recipients[i].preferences = saved }
        }
        return recipients
    }

    private static func device(_ row: some StoreRow) throws -> Recipient.Device {
        Recipient.Device(id: try row.int64(1), token: try row.string(2), environment: try row.string(3))
    }
}
