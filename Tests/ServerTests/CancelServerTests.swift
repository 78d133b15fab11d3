import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// `DELETE /v1/notifications/{id}` on a notification already fanned out, in process
/// on both stores with a clock the test holds: the delivery sent before it is
/// counted, the one held by quiet hours is cancelled, never reaches the mock once
/// its time comes, and the notification's `notification.completed` webhook fires
/// once, now that nothing of it is pending.
@Suite(.serverPostgres) struct CancelServerTests {
    @Test(arguments: ServerStore.allCases)
    func aCancelledHeldDeliveryNeverGoesAndTheNotificationCompletes(_ store: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let receiver = WebhookReceiver()
        receiver.up()
        defer { receiver.stop() }
        var options = ServerProcess.Options()
        options.pollMillis = 20
        options.extraApps = Held.apps
        options.extraTopLevel = """
            webhooks:
              poll_interval_ms: 50
              endpoints:
                - url: \(receiver.url)
                  secret_file: webhook.secret
                  events: [notification.completed]
            """
        // 23:00 UTC: quiet hours (22:00 to 08:00) for a user in UTC.
        let clock = FakeClock(at: "2026-06-01T23:00:00Z")
        try await withClockedServer(store, production: production, clock: clock, options: options, prepare: { files in
            chmod(files.scratch.file("webhook.secret", WebhookTests.secret + "\n"), 0o600)
        }) { server in
            let t = Harness.tokens(2, seed: 2323)
            await Held.user(server, "awake", token: t[0], app: "travel")
            await Held.user(server, "asleep", token: t[1], app: "travel",
                            preferences: #"{\#(QuietHoursTests.quiet2200to0800),"timeZone":"UTC"}"#)
            let posted = await server.backend("POST", "/v1/notifications",
                #"{"type":"message","app_type":"travel","user_ids":["awake","asleep"],"alert":{"title":"Trip","body":"b"}}"#)
            let id = try #require(posted.json["notification_id"] as? String, "\(posted)")
            let deliveries = await Held.deliveries(server, id)
            let sentID = try #require(deliveries.first { $0["user_id"] as? String == "awake" }?["apns_id"] as? String)
            let heldID = try #require(deliveries.first { $0["user_id"] as? String == "asleep" }?["apns_id"] as? String)
            try await Held.wait(server, sentID)
            #expect(await Held.delivery(server, heldID)["not_before"] as? String == "2026-06-02T08:00:00.000Z")

            let cancelled = await server.backend("DELETE", "/v1/notifications/\(id)")
            #expect(cancelled.status == 200, "\(cancelled.body)")
            #expect(cancelled.body == #"{"notification_id":"\#(id)","cancelled":1,"already_sent":1,"in_flight":0}"#)
            #expect(await Held.delivery(server, heldID)["state"] as? String == "cancelled")
            let summary = await server.backend("GET", "/v1/notifications/\(id)").json["summary"] as? [String: Any]
            #expect(summary?["cancelled"] as? Int == 1 && summary?["delivered"] as? Int == 1
                    && summary?["pending"] as? Int == 0, "\(summary ?? [:])")

            try await WebhookTests.wait("notification.completed") { Self.completed(receiver, id).count == 1 }
            let data = try #require(Self.completed(receiver, id).first?["data"] as? [String: Any])
            let counted = data["summary"] as? [String: Any]
            #expect(counted?["cancelled"] as? Int == 1 && counted?["delivered"] as? Int == 1, "\(data)")

            // Past quiet hours: a later notification to the same device goes, and the
            // claim takes due rows oldest first, so the cancelled one would have gone
            // before it.
            clock.set("2026-06-02T09:00:00Z")
            let probe = try await Held.notify(server,
                #""type":"message","app_type":"travel","user_ids":["asleep"],"alert":{"title":"Probe","body":"b"}"#)
            try await Held.wait(server, probe.apnsID)
            try await server.drained()
            #expect(Held.sent(production, heldID).isEmpty, "the cancelled delivery reached APNs")
            #expect(await Held.delivery(server, heldID)["state"] as? String == "cancelled")
            #expect(Self.completed(receiver, id).count == 1, "one event for the notification")
        }
    }

    /// The receiver's `notification.completed` events for `id`, once each by event id.
    static func completed(_ receiver: WebhookReceiver, _ id: String) -> [[String: Any]] {
        var byID: [String: [String: Any]] = [:]
        for body in receiver.delivered.map(WebhookTests.json) where body["type"] as? String == "notification.completed" {
            if (body["data"] as? [String: Any])?["notification_id"] as? String == id, let eventID = body["id"] as? String {
                byID[eventID] = body
            }
        }
        return Array(byID.values)
    }
}
