import Foundation
import ServiceCore
import Store

/// Why a pending delivery has not gone yet, and until when: the `waiting` member of
/// a pending delivery in the log's answers. Derived from what the store keeps (the
/// outbox row, the delivery's `not_before`, attempts and batching, the user's saved
/// time zone and quiet hours), never stored itself:
///
/// - `sending`: a worker holds it now, `until` its lease ends.
/// - `quiet_hours`: held until the user's quiet hours end (`local_until`, wall-clock
///   time in `time_zone`, the user's zone).
/// - `batching`: a batching window's send, waiting for the window to close.
/// - `retry_backoff`: APNs gave no answer (or asked to wait); tried again at `until`.
/// - `due`: a worker may take it now (`since` it became due).
/// - `late`: due for longer than `lateAfterMillis`: the outbox keeps it past its
///   time (no worker running, or one that cannot keep up).
///
/// A scheduled notification, before it fans out, waits with reason `scheduled`
/// (see `Scheduling.json`).
package struct Waiting: Sendable, Equatable {
    enum Reason: String, Sendable {
        case sending, batching, due, late, scheduled
        case quietHours = "quiet_hours"
        case retryBackoff = "retry_backoff"
    }

    var reason: Reason
    /// When the wait ends (ms); for `due` and `late`, when it began.
    var at: Int64
    /// Quiet hours only: the end's wall-clock time ("07:00") in the user's zone.
    var localEnd: String?
    var timeZone: String?

    /// A worker claims what is due within its poll: one due this long is late.
    static let lateAfterMillis: Int64 = 60_000

    /// Nil when the delivery is not waiting (final), or not in the outbox.
    static func of(_ d: DeliveryView, place: OutboxPlace?, preferences: [String: PreferenceValue],
                   now: Int64) -> Waiting? {
        guard d.state == "pending", let place, let available = place.availableAt else { return nil }
        if let lease = place.leaseUntil, lease > now { return Waiting(reason: .sending, at: lease) }
        guard available > now else {
            return Waiting(reason: now - available > lateAfterMillis ? .late : .due, at: available)
        }
        // A wait that ends the instant the user's quiet hours do is theirs; a window's
        // send (a carrier) waits for its window otherwise. Quiet hours are the only
        // other thing that sets `not_before`: one ending elsewhere is a retry's backoff.
        let quiet = QuietHours(preferences: preferences)
        let endsWithQuietHours = quiet?.end(ifQuietAt: available - 1) == available
        let reason: Reason
        if d.batched != nil {
            reason = endsWithQuietHours ? .quietHours : .batching
        } else if d.notBefore == available && (d.attempts == 0 || endsWithQuietHours) {
            reason = .quietHours
        } else {
            reason = .retryBackoff
        }
        guard reason == .quietHours else { return Waiting(reason: reason, at: available) }
        let zone = quiet?.zone ?? preferences[QuietHours.zoneKey]?.text.flatMap(TimeZone.init(identifier:))
            ?? TimeZone(identifier: "UTC")!
        return Waiting(reason: .quietHours, at: available, localEnd: Self.wallClock(available, in: zone),
                       timeZone: zone.identifier)
    }

    /// "HH:mm" of the instant in the zone.
    static func wallClock(_ millis: Int64, in zone: TimeZone) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = calendar.dateComponents([.hour, .minute], from: Date(timeIntervalSince1970: TimeInterval(millis) / 1000))
        return String(format: "%02d:%02d", parts.hour ?? 0, parts.minute ?? 0)
    }

    package var json: JSON {
        var members: [(String, JSON)] = [("reason", .string(reason.rawValue))]
        switch reason {
        case .due, .late: members.append(("since", Timestamp.json(at)))
        default: members.append(("until", Timestamp.json(at)))
        }
        if let localEnd, let timeZone {
            members.append(("local_until", .string(localEnd)))
            members.append(("time_zone", .string(timeZone)))
        }
        return .object(members)
    }

    /// The waits of a page of deliveries, by apns-id: one outbox read for the page,
    /// one preferences read per user and app among its pending ones.
    package static func lookUp(_ deliveries: [DeliveryView], in store: any DeliveryStore,
                       now: Int64) async throws -> [String: Waiting] {
        let pending = deliveries.filter { $0.state == "pending" }
        guard !pending.isEmpty else { return [:] }
        let places = try await store.outboxPlaces(apnsIDs: pending.map(\.apnsID))
        var preferences: [String: [String: PreferenceValue]] = [:]
        var waits: [String: Waiting] = [:]
        for d in pending {
            guard let place = places[d.apnsID] else { continue }
            let key = d.userID + "\u{1F}" + place.appType
            if preferences[key] == nil {
                preferences[key] = try await store.preferences(userID: d.userID, appType: place.appType)
            }
            waits[d.apnsID] = of(d, place: place, preferences: preferences[key] ?? [:], now: now)
        }
        return waits
    }
}

/// What a notification says, as its payload (or a scheduled one's request) has
/// it: the alert's title and body, and the entity it is about. The log keeps the
/// bytes sent; this reads them back for support, who are asked "what did it say?".
package enum NotificationContent {
    /// From a sent payload: the alert is `aps.alert` (an object, or a string: the body).
    package static func json(payload: [UInt8]) -> JSON? {
        guard let object = try? JSON.parse(payload), case .object = object else { return nil }
        return json(alert: object["aps"]?["alert"], object)
    }

    /// From a scheduled request: the alert is the body's `alert`.
    static func json(request: [UInt8]) -> JSON? {
        guard let object = try? JSON.parse(request), case .object = object else { return nil }
        return json(alert: object["alert"], object)
    }

    private static func json(alert: JSON?, _ object: JSON) -> JSON {
        var title: JSON = .null, body: JSON = .null
        switch alert {
        case .string(let text)?: body = .string(text)
        case .object?:
            title = alert?["title"]?.stringValue.map(JSON.string) ?? .null
            body = alert?["body"]?.stringValue.map(JSON.string) ?? .null
        default: break
        }
        func text(_ key: String) -> JSON { object[key]?.stringValue.map(JSON.string) ?? .null }
        return .object([("title", title), ("body", body), ("entity_type", text("entity_type")),
                        ("entity_title", text("entity_title"))])
    }
}
