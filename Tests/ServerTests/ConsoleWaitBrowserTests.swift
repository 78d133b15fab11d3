import APNsMock
import Foundation
import Testing
import TestSupport

/// The console says why something waits, in a real browser against the application
/// served in process on a port of its own, its clock held by the test: a delivery
/// held by quiet hours shows the reason and the user's local end; a scheduled
/// notification shows its time, in UTC with the zone named, and a cancel button that
/// cancels it; an id the server never saw is "no such user". The screenshots are kept
/// beside the other console tests' for review (a test never writes into the tree:
/// docs/ holds copies chosen by hand).
@Suite struct ConsoleWaitBrowserTests {

    @Test func theConsoleExplainsAWait() async throws {
        // 23:00 in Lisbon: inside the user's quiet hours (22:00 to 07:00).
        let clock = FakeClock(at: WaitingTests.t0)
        let (mock, server) = try await Held.start(clock, live: true)
        let port = try #require(server.port)
        defer { mock.stop(); Task { await server.stop() } }

        let token = Harness.tokens(1, seed: 5201)[0]
        await Held.user(server, "lisboeta", token: token, app: "travel", preferences: WaitingTests.lisbon)
        let held = try await Held.notify(server, #""type":"message","app_type":"travel","user_ids":["lisboeta"],"alert":{"title":"Trip tomorrow","body":"The bus leaves at 08:00"}"#)
        let scheduled = await server.backend("POST", "/v1/notifications",
                                             #"{"type":"order_status_changed","app_type":"staff","user_ids":["lisboeta"],"alert":{"title":"Reminder","body":"b"},"send_at":"2026-06-02T09:30:00Z"}"#)
        #expect(scheduled.status == 202, "\(scheduled.body)")
        let scheduledID = try #require(scheduled.json["notification_id"] as? String)

        try FileManager.default.createDirectory(atPath: ConsoleBrowserTests.screenshots, withIntermediateDirectories: true)
        let driver = try await WebDriver.start(width: 1440, height: 900)
        do {
            let shot = { (name: String) in try await driver.screenshot(to: ConsoleBrowserTests.screenshots + "/\(name).png") }
            try await driver.open("http://127.0.0.1:\(port)/console")
            try await driver.waitFor("the sign-in form", "return !document.getElementById('signin').hidden")
            try await driver.type("#key", Harness.apiKey)
            try await driver.click("#signin-form button[type=submit]")
            try await driver.waitFor("the recent notifications", "return !!document.querySelector('#notifications')")

            // The held delivery: why, until 07:00 in Lisbon, and the same instant in UTC.
            try await driver.run("location.hash = arguments[0]", ["#/notification/\(held.id)"])
            try await driver.waitFor("the wait", "return !!document.querySelector('#deliveries .waiting')")
            let wait = try await driver.text("#deliveries .waiting")
            #expect(wait == "quiet hours until 07:00 Europe/Lisbon (2026-06-02 06:00 UTC)", "\(wait)")
            #expect(try await driver.text("#content .content-title") == "Trip tomorrow")
            #expect(try await driver.text("#content .content-body") == "The bus leaves at 08:00")
            #expect(try await driver.text("#view").contains("created 2026-06-01 22:00 UTC"))
            try await shot("console-quiet-hours")

            // The scheduled one: listed with its time, and cancelled from the list.
            try await driver.run("location.hash = '#/scheduled'")
            try await driver.waitFor("the scheduled list", "return !!document.querySelector('#scheduled .cancel')")
            let row = try await driver.text("#scheduled tbody")
            #expect(row.contains("2026-06-02 09:30 UTC") && row.contains(scheduledID) && row.contains("Reminder"), "\(row)")
            try await shot("console-scheduled")
            try await driver.click("#scheduled .cancel")
            try await driver.waitFor("the cancel", """
                return !document.querySelector('#scheduled .cancel')
                  && document.querySelector('#scheduled tbody').textContent.includes('cancelled')
                """)
            let after = await server.backend("GET", "/v1/notifications/\(scheduledID)")
            #expect(after.json["state"] as? String == "cancelled", "\(after.body)")

            // An id the server never saw.
            try await driver.run("location.hash = '#/user/nobody-by-that-name'")
            try await driver.waitFor("the answer", "return !!document.querySelector('#no-such-user')")
            #expect(try await driver.text("#no-such-user").hasPrefix("No such user"))
            #expect(try await driver.run("return !document.querySelector('.prefs')") as? Bool == true)
            await driver.quit()
        } catch {
            try? await driver.screenshot(to: ConsoleBrowserTests.screenshots + "/wait-failure.png")
            await driver.quit()
            throw error
        }
    }
}
