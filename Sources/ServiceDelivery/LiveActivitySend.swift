import APNs
import Foundation
import ServiceCore
import Store

/// `POST /v1/live-activities`: a Live Activity start, update or end, built with the
/// library's typed `LiveActivity` (so a payload ActivityKit would drop is a 400 and
/// stores nothing), then one delivery per targeted token through the same outbox
/// and worker as notifications (push type `liveactivity`, the app's topic with
/// `.push-type.liveactivity`, added by `APNs.Notification`).
///
/// - start: `user_ids`; each user's push-to-start tokens for `attributes_type`.
/// - update / end: `activity_id` (that activity's update token), or `user_ids`
///   (their update tokens, of `attributes_type` when given).
package struct LiveActivitySend: Sendable {
    let config: ServerConfig
    let store: any DeliveryStore
    let clock: any ServiceClock

    package init(config: ServerConfig, store: any DeliveryStore, clock: any ServiceClock) {
        self.config = config
        self.store = store
        self.clock = clock
    }

    package struct Request: Sendable {
        package var app: AppConfig
        package var event: LiveActivityEvent
        var target: LiveActivityTarget
        var payload: [UInt8]
        var priority: Int
        var expiration: Int64?
        var activityID: String?
    }

    package func parse(_ body: JSON) throws(RequestError) -> Request {
        guard let appType = body["app_type"]?.stringValue else { throw .invalid("app_type is required") }
        guard let app = config.app(appType) else { throw .invalid("unknown app_type '\(appType)'") }
        guard let name = body["event"]?.stringValue else { throw .invalid("event is required (start, update or end)") }
        guard let event = LiveActivityEvent(rawValue: name) else {
            throw .invalid("event must be start, update or end, not '\(name)'")
        }
        let attributesType = try Self.identifier(body, "attributes_type")
        let activityID = try Self.activityID(body, "activity_id")
        let userIDs = try Self.userIDs(body)

        let target: LiveActivityTarget
        switch (event, userIDs, activityID) {
        case (.start, _, .some): throw .invalid("a start goes to push-to-start tokens: give user_ids, not activity_id")
        case (.start, nil, nil): throw .invalid("a start needs user_ids")
        case (.start, let users?, nil):
            guard let attributesType else { throw .invalid("a start needs attributes_type") }
            target = .startTokens(userIDs: users, attributesType: attributesType)
        case (_, .some, .some): throw .invalid("give user_ids or activity_id, not both")
        case (_, nil, nil): throw .invalid("an \(event.rawValue) needs activity_id or user_ids")
        case (_, let users?, nil): target = .updateTokens(userIDs: users, attributesType: attributesType)
        case (_, nil, let activity?): target = .activity(activity)
        }

        let timestamp = try Self.seconds(body, "timestamp") ?? clock.nowSeconds
        let contentState = try Self.object(body, "content_state")
        let staleDate = try Self.seconds(body, "stale_date")
        let dismissalDate = try Self.seconds(body, "dismissal_date")
        let relevanceScore = try Self.number(body, "relevance_score")
        let attributes = try Self.object(body, "attributes")
        let alert = try Self.alert(body)
        let inputPushToken = try Self.flag(body, "input_push_token")
        let activity: LiveActivity
        do throws(LiveActivity.Error) {
            activity = try LiveActivity(
                event: event, timestamp: timestamp, contentState: contentState, staleDate: staleDate,
                dismissalDate: dismissalDate, relevanceScore: relevanceScore,
                attributesType: event == .start ? attributesType : nil, attributes: attributes, alert: alert,
                inputPushToken: inputPushToken)
        } catch {
            throw .invalid(error.description)
        }

        // Apple: 10 lights the device and counts against the activity's budget; 5
        // does not. An update without an alert goes at 5 unless asked otherwise.
        var priority = event == .update && activity.alert == nil ? 5 : 10
        if let p = body["priority"], !p.isNull {
            guard let n = p.intValue, n == 5 || n == 10 else {
                throw .invalid("priority must be 10 or 5 for a Live Activity")
            }
            priority = n
        }
        var expiration: Int64?
        if let e = body["expiration"], !e.isNull {
            guard let n = e.integralValue, n >= 0 else { throw .invalid("expiration must be a UNIX time in seconds, 0 or more") }
            expiration = n
        }
        let payload = Payload(aps: APS(liveActivity: activity))
        // The engine's own check, now, so that the worker can never refuse it.
        do {
            _ = try APNs.Notification(topic: app.topic, pushType: .liveactivity,
                                      priority: Priority(rawValue: priority), payload: payload)
        } catch {
            throw .invalid(error.description)
        }
        return Request(app: app, event: event, target: target, payload: payload.bytes, priority: priority,
                       expiration: expiration, activityID: activityID)
    }

    package struct Result: Sendable {
        let notificationID: String
        package let deliveries: Int
        /// Named users without a token the send could use.
        let noTokens: Int?

        package var json: JSON {
            var members: [(String, JSON)] = [("notification_id", .string(notificationID)), ("deliveries", .int(deliveries))]
            if let noTokens { members.append(("skipped", .object([("no_tokens", .int(noTokens))]))) }
            return .object(members)
        }
    }

    /// Committed before it returns: the 202 may go.
    /// `notificationID`: the caller's (an idempotency key's resource id), else a new one.
    package func run(_ request: Request, notificationID: String? = nil) async throws -> Result {
        let tokens = try await store.liveActivityTokens(appType: request.app.appType, request.target)
        let now = clock.nowMillis
        let deliveries = tokens.map { t in
            NewDelivery(userID: t.userID, deviceID: t.id, token: t.token, environment: t.environment,
                        apnsID: UUID().uuidString.lowercased(), payload: request.payload, pushType: "liveactivity",
                        priority: request.priority, expiration: request.expiration)
        }
        let notification = NewNotification(id: notificationID ?? UUID().uuidString.lowercased(), type: "live_activity.\(request.event.rawValue)",
                                           entityType: request.activityID == nil ? nil : "live_activity",
                                           entityID: request.activityID, appType: request.app.appType)
        try await store.enqueue(notification, deliveries, now: now)
        var noTokens: Int?
        switch request.target {
        case .startTokens(let users, _), .updateTokens(let users, _):
            noTokens = Set(users).subtracting(tokens.map(\.userID)).count
        case .activity:
            noTokens = nil
        }
        return Result(notificationID: notification.id, deliveries: deliveries.count, noTokens: noTokens)
    }

    /// Whether a delivery the worker just saw delivered ends its activity: an `end`
    /// retires the activity's update token (nothing more can reach that activity).
    package static func endsActivity(_ delivery: NewDelivery) -> Bool {
        guard delivery.pushType == "liveactivity" else { return false }
        return (try? JSON.parse(delivery.payload))?["aps"]?["event"]?.stringValue == LiveActivityEvent.end.rawValue
    }

    // MARK: Reading the body

    static func identifier(_ body: JSON, _ key: String) throws(RequestError) -> String? {
        guard let v = body[key], !v.isNull else { return nil }
        guard let s = v.stringValue, Registration.isIdentifier(s) else {
            throw .invalid("\(key) must be a string of 1 to 256 characters")
        }
        return s
    }

    /// An activity id as every route stores and looks it up. ActivityKit's ids are
    /// UUIDs, which a device or backend may spell in either case: kept in lower case,
    /// so that two spellings are one activity, with one owner (byte for byte, another
    /// user could claim the other spelling and get the owner's updates). White space
    /// around an id is refused rather than trimmed: it is a caller's bug, not a name.
    package static func activityID(_ body: JSON, _ key: String) throws(RequestError) -> String? {
        if let text = body[key]?.stringValue, let first = text.unicodeScalars.first, let last = text.unicodeScalars.last,
           first.properties.isWhitespace || last.properties.isWhitespace {
            throw .invalid("\(key) must not begin or end with white space")
        }
        guard let id = try identifier(body, key) else { return nil }
        let u = Array(id.utf8)
        let isUUID = u.count == 36 && u.enumerated().allSatisfy { i, c in
            [8, 13, 18, 23].contains(i) ? c == UInt8(ascii: "-")
                : (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66)
        }
        return isUUID ? id.lowercased() : id
    }

    static func userIDs(_ body: JSON) throws(RequestError) -> [String]? {
        guard let v = body["user_ids"], !v.isNull else { return nil }
        return try FanOut.userIDs(v)
    }

    package static func seconds(_ body: JSON, _ key: String) throws(RequestError) -> Int64? {
        guard let v = body[key], !v.isNull else { return nil }
        guard let n = v.integralValue, n >= 0 else { throw .invalid("\(key) must be a UNIX time in seconds") }
        return n
    }

    package static func number(_ body: JSON, _ key: String) throws(RequestError) -> Double? {
        guard let v = body[key], !v.isNull else { return nil }
        // A Double: 1e400 would become infinity, which JSON cannot write.
        guard case .number(let text) = v, let d = Double(text), d.isFinite else {
            throw .invalid("\(key) must be a number within a double's range")
        }
        return d
    }

    static func flag(_ body: JSON, _ key: String) throws(RequestError) -> Bool {
        guard let v = body[key], !v.isNull else { return false }
        guard let b = v.boolValue else { throw .invalid("\(key) must be true or false") }
        return b
    }

    package static func object(_ body: JSON, _ key: String) throws(RequestError) -> JSONValue? {
        guard let v = body[key], !v.isNull else { return nil }
        guard case .object = v else { throw .invalid("\(key) must be a JSON object") }
        return v.apnsValue
    }

    package static func alert(_ body: JSON) throws(RequestError) -> APS.Alert? {
        guard let v = body["alert"], !v.isNull else { return nil }
        if let text = v.stringValue { return APS.Alert(body: text) }
        guard case .object(let members) = v else { throw .invalid("alert must be an object ({\"title\",\"body\"}) or a string") }
        var title: String?, subtitle: String?, text: String?
        for (key, value) in members {
            guard let s = value.stringValue else { throw .invalid("alert.\(key) must be a string") }
            switch key {
            case "title": title = s
            case "subtitle": subtitle = s
            case "body": text = s
            default: throw .invalid("alert.\(key) is not one of title, subtitle, body")
            }
        }
        return APS.Alert(title: title, subtitle: subtitle, body: text)
    }
}

extension JSON {
    /// The same value for the APNs library's payload builder, numbers spelled as
    /// sent (as a notification's `data` keeps them).
    var apnsValue: JSONValue {
        switch self {
        case .null: .null
        case .bool(let b): .bool(b)
        case .number(let text): .number(text)
        case .string(let s): .string(s)
        case .array(let items): .array(items.map(\.apnsValue))
        case .object(let members): .object(members.map { ($0.0, $0.1.apnsValue) })
        }
    }
}
