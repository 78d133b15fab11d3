import Foundation
import Hummingbird
import ServiceCore
import Store

/// `POST /api/user/notification-events {apns_id, event: "received"|"opened", at?}`:
/// the app reports that a notification reached the device (its Notification
/// Service Extension ran) or that the user opened it. Only for a delivery made to
/// the signed-in user: any other apns-id is a 404, and nothing changes; one that
/// APNs never took (failed, or still pending) is a 409. A time before the send is
/// read as the send. A repeat changes nothing (the first time is kept); an open
/// implies a receipt.
package struct NotificationEventRoutes: Sendable {
    let store: any DeliveryStore
    let clock: any ServiceClock
    let body: BodyReader
    let auth: Auth
    let metrics: ServiceMetrics

    package func register(on router: Router<ServiceContext>) {
        router.group("api/user").add(middleware: UserAuthMiddleware(auth: auth))
            .post("notification-events", use: report)
    }

    @Sendable func report(_ request: Request, context: ServiceContext) async throws -> Response {
        let user = try context.requireUser()
        let json = try await body.object(request)
        guard let raw = json["apns_id"]?.stringValue, let apnsID = Self.apnsID(raw) else {
            throw APIError.badRequest("apns_id is required (the notification's apns-id, a UUID)")
        }
        guard let name = json["event"]?.stringValue, let event = NotificationEvent(rawValue: name) else {
            throw APIError.badRequest("event must be \"received\" or \"opened\"")
        }
        let now = clock.nowMillis
        var at = now
        if let value = json["at"], !value.isNull {
            guard let millis = Timestamp.millis(value) else {
                throw APIError.badRequest("at must be an ISO-8601 time (2026-11-22T21:28:00Z) or UNIX seconds")
            }
            // A device's clock may run ahead: never later than the report itself.
            at = min(millis, now)
        }
        let result: NotificationEventResult
        switch try await store.recordNotificationEvent(apnsID: apnsID, userID: user.userID, event, at: at, now: now) {
        case nil: throw APIError.notFound("notification not found")
        case .notDelivered(let state)?:
            throw APIError.conflict("the notification was not delivered (\(state)): it cannot have been \(event.rawValue)")
        case .recorded(let recorded)?: result = recorded
        }
        for new in result.new { metrics.notificationEvent(app: result.appType, type: result.type, event: new.rawValue) }
        return JSONResponse.ok(.object([
            ("success", .bool(true)),
            ("apns_id", .string(apnsID)),
            ("received_at", Timestamp.json(result.receivedAt)),
            ("opened_at", Timestamp.json(result.openedAt)),
        ]))
    }

    /// A UUID in the log's spelling (lower case), or nil.
    static func apnsID(_ text: String) -> String? {
        guard text.utf8.count == 36, UUID(uuidString: text) != nil else { return nil }
        return text.lowercased()
    }
}
