import Foundation
import ServiceCore
import Store

/// `send_at` and `schedule_key` on `POST /v1/notifications` and
/// `POST /v1/live-activities`. A request with `send_at` is checked whole at once
/// (a 400 stores nothing), then stored as it is (`ScheduledSends`) and fanned out
/// by `ScheduleWorker` at its time, as if posted then: the user's preferences,
/// quiet hours and batching are those of send time, and so are their devices.
package struct Scheduling: Sendable {
    /// When to send (ms since 1970), and the backend's name for it.
    package struct When: Sendable {
        package var sendAt: Int64
        package var scheduleKey: String?
    }

    static let sendAtKey = "send_at"
    static let scheduleKeyKey = "schedule_key"

    /// The body's `send_at` and `schedule_key`, checked; nil without `send_at`. A
    /// time in the past sends now; more than `horizonDays` ahead is a 400.
    package static func when(_ body: JSON, now: Int64, horizonDays: Int) throws(RequestError) -> When? {
        var key: String?
        if let k = body[scheduleKeyKey], !k.isNull {
            guard let text = k.stringValue, !text.isEmpty, text.utf8.count <= 256,
                  text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7f })
            else { throw .invalid("schedule_key must be a string of 1 to 256 characters") }
            key = text
        }
        guard let value = body[sendAtKey], !value.isNull else {
            if key != nil { throw .invalid("schedule_key needs send_at (it names a scheduled notification)") }
            return nil
        }
        guard let sendAt = Timestamp.millis(value) else {
            throw .invalid("send_at must be an ISO-8601 time (\"2026-03-08T09:00:00Z\") or UNIX seconds")
        }
        let horizon = now + Int64(horizonDays) * 86_400_000
        guard sendAt <= horizon else {
            throw .invalid("send_at is more than \(horizonDays) days ahead (schedule.horizon_days)")
        }
        return When(sendAt: sendAt, scheduleKey: key)
    }

    /// The body to store: the request less its schedule, replayed at send time.
    package static func stored(_ body: JSON) -> JSON {
        guard case .object(let members) = body else { return body }
        return .object(members.filter { $0.0 != sendAtKey && $0.0 != scheduleKeyKey })
    }

    /// The 202 of a scheduled request.
    package static func accepted(id: String, when: When, superseded: String?) -> JSON {
        var members: [(String, JSON)] = [("notification_id", .string(id)), ("state", .string("scheduled")),
                                         ("send_at", Timestamp.json(when.sendAt))]
        if let key = when.scheduleKey { members.append(("schedule_key", .string(key))) }
        if let superseded { members.append(("superseded", .string(superseded))) }
        return .object(members)
    }

    /// A schedule as `GET /v1/notifications/{id}` shows it before it is sent (or
    /// once it never will be: cancelled, superseded, failed).
    package static func json(_ row: ScheduleRow, now: Int64) -> JSON {
        var members: [(String, JSON)] = [
            ("notification_id", .string(row.schedule.id)),
            ("type", .string(row.schedule.type)),
            ("state", .string(row.state)),
            ("send_at", Timestamp.json(row.schedule.sendAt)),
            ("created_at", Timestamp.json(row.createdAt)),
        ]
        if let key = row.schedule.scheduleKey { members.append(("schedule_key", .string(key))) }
        if let by = row.supersededBy { members.append(("superseded_by", .string(by))) }
        if let at = row.finishedAt, row.state != "sent" { members.append(("finished_at", Timestamp.json(at))) }
        if let error = row.error { members.append(("error", .string(error))) }
        members.append(("summary", .object([("pending", .int(0)), ("delivered", .int(0)), ("failed", .int(0))])))
        members.append(("deliveries", .array([])))
        members.append(contentsOf: extra(row, now: now))
        return .object(members)
    }

    /// One of `GET /v1/scheduled-notifications`' items: the schedule as
    /// `GET /v1/notifications/{id}` shows it, less the (empty) summary and deliveries.
    package static func listItem(_ row: ScheduleRow, now: Int64) -> JSON {
        guard case .object(let members) = json(row, now: now) else { return .null }
        return .object(members.filter { $0.0 != "summary" && $0.0 != "deliveries" })
    }

    /// What support reads beside a schedule's own fields: its app, what it will say,
    /// and, while it waits, why and until when (see `Waiting`).
    static func extra(_ row: ScheduleRow, now: Int64) -> [(String, JSON)] {
        var members: [(String, JSON)] = [("app_type", .string(row.schedule.appType))]
        if let content = NotificationContent.json(request: row.schedule.request) { members.append(("content", content)) }
        if let waiting = waiting(row, now: now) { members.append(("waiting", waiting.json)) }
        return members
    }

    /// `scheduled` until its time; past it and not yet taken by a worker, `due`, or
    /// `late` once the outbox would call a delivery late. Nil once a worker has it
    /// (`sending`: its state says so) and once final.
    static func waiting(_ row: ScheduleRow, now: Int64) -> Waiting? {
        let sendAt = row.schedule.sendAt
        switch row.state {
        case "scheduled":
            if sendAt > now { return Waiting(reason: .scheduled, at: sendAt) }
            return Waiting(reason: now - sendAt > Waiting.lateAfterMillis ? .late : .due, at: sendAt)
        default: return nil
        }
    }
}

extension JSON {
    /// This object with its `state` member set to `state`.
    package func with(state: String) -> JSON {
        guard case .object(let members) = self else { return self }
        return .object(members.map { $0.0 == "state" ? ("state", .string(state)) : $0 })
    }
}
