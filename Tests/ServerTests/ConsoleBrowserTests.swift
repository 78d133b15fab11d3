import APNsMock
import Foundation
import Testing
import TestSupport

/// The console in a real browser (headless Chromium through chromedriver) against
/// the real apns-server binary and a real mock: sign in, look a user up, open a
/// notification, send a test push and see it delivered; a wrong key shows an
/// error and reaches nothing; every page at 375 px and at 1440 px wide. The
/// screenshots are kept for review (the path is printed).
@Suite struct ConsoleBrowserTests {
    static let screenshots = Package.root.appendingPathComponent(".build/console-screenshots").path

    @Test func aSupportEngineerSignsInFindsAUserAndSendsATestPush() async throws {
        let t = Harness.tokens(2, seed: 750)
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let server = ServerProcess(sandbox: nil, production: production)
        try APIKeyScopeTests.keys(server)
        try await server.start()
        defer { Task { await server.stop() } }

        // Seeded through the API: one active token, one the user logged out of, one notification.
        await BackendAPITests.register(server, user: "ana", token: t[0])
        await BackendAPITests.register(server, user: "ana", token: t[1])
        let logout = await server.request("DELETE", "/api/user/device-token", body: #"{"deviceToken":"\#(t[1])"}"#,
                                          bearer: Harness.jwt(sub: "ana"))
        #expect(logout.status == 200)
        let notification = try await WorkerTests.notify(server, users: ["ana"])
        try await server.drained()
        let apnsID = try #require(await WorkerTests.deliveries(server, notification)[t[0]]?["apns_id"] as? String)

        try FileManager.default.createDirectory(atPath: Self.screenshots, withIntermediateDirectories: true)
        print("console screenshots: \(Self.screenshots)")
        let driver = try await WebDriver.start(width: 1440, height: 900)
        do {
            try await Self.walkThrough(driver, server: server, production: production, token: t[0],
                                       notification: notification, apnsID: apnsID)
            await driver.quit()
        } catch {
            try? await driver.screenshot(to: Self.screenshots + "/failure.png")
            await driver.quit()
            throw error
        }
    }

    static func walkThrough(_ driver: WebDriver, server: ServerProcess, production: MockServer, token: String,
                            notification: String, apnsID: String) async throws {
        let shot = { (name: String) in try await driver.screenshot(to: screenshots + "/\(name).png") }
        try await driver.open("http://127.0.0.1:\(server.port)/console")
        try await driver.waitFor("the sign-in form", "return !document.getElementById('signin').hidden")

        // A wrong key: an error, no data, nothing kept, and every API call it made refused.
        try await driver.type("#key", "not-the-key")
        try await driver.click("#signin-form button[type=submit]")
        try await driver.waitFor("the refusal", "return document.getElementById('signin-error').textContent.length > 0")
        let refusal = try await driver.text("#signin-error")
        #expect(refusal == "That key was refused: invalid API key")
        #expect(try await driver.run("""
            return document.getElementById('app').hidden && document.getElementById('view').childElementCount === 0
              && sessionStorage.length === 0
            """) as? Bool == true)
        let refusedCalls = try await driver.run("""
            return performance.getEntriesByType('resource').filter(e => e.name.includes('/v1/'))
              .map(e => e.responseStatus)
            """) as? [Int]
        #expect(refusedCalls == [401], "the one call a wrong key makes is refused")
        try await shot("1440-wrong-key")

        // The right key: kept in this tab's sessionStorage, never in a URL.
        try await driver.type("#key", Harness.apiKey)
        try await driver.click("#signin-form button[type=submit]")
        try await driver.waitFor("the recent notifications", "return !!document.querySelector('#notifications')")
        #expect(try await driver.run("""
            return sessionStorage.getItem('apns-console-key') === arguments[0] && !location.href.includes(arguments[0])
              && performance.getEntriesByType('resource').every(e => !e.name.includes(arguments[0]))
            """, [Harness.apiKey]) as? Bool == true)
        #expect(try await driver.text("#notifications tbody").contains(notification))

        // Look the user up: the active token, the one logged out of (and why), the delivery.
        try await driver.type("#lookup-value", "ana")
        try await driver.click("#lookup button[type=submit]")
        try await driver.waitFor("the user's devices", "return !!document.querySelector('#devices')")
        let devices = try await driver.text("#devices tbody")
        #expect(devices.contains("active") && devices.contains("inactive: unregistered"), "\(devices)")
        #expect(try await driver.text("#user-deliveries").contains(notification))
        try await shot("1440-user")

        // Open the notification from the user's deliveries.
        try await driver.click("#user-deliveries a[href^='#/notification/']")
        try await driver.waitFor("the notification's summary", "return !!document.querySelector('#summary')")
        #expect(try await driver.text("#summary [data-count=delivered] b") == "1")
        #expect(try await driver.text("#deliveries").contains(apnsID))
        try await shot("1440-notification")

        // Back to the user, send a test push to the active device, watch it be delivered.
        try await driver.run("location.hash = '#/user/ana'")
        try await driver.waitFor("the user's devices", "return !!document.querySelector('#devices .send-test')")
        try await driver.click("#devices .send-test")
        try await driver.waitFor("the test push's answer", """
            const s = document.getElementById('test-state'); return !!s && s.textContent !== 'pending'
            """)
        #expect(try await driver.text("#test-state") == "delivered")
        #expect(production.attempts(for: token) == 2, "the seeded notification, then the test push")
        try await shot("1440-test-push")

        // Every page at both widths, none wider than the window.
        let pages = [("notifications", "#/notifications", "#notifications"), ("user", "#/user/ana", "#devices"),
                     ("notification", "#/notification/\(notification)", "#summary"), ("apns-id", "#/apns/\(apnsID)", "#delivery"),
                     ("deactivated", "#/deactivated", "#deactivated"), ("chart", "#/stats", "#stats svg polyline")]
        for (width, height) in [(375, 812), (1440, 900)] {
            try await driver.resize(width: width, height: height)
            for (name, hash, ready) in pages {
                try await driver.run("location.hash = arguments[0]", [hash])
                try await driver.waitFor("the \(name) page", "return !!document.querySelector(arguments[0])"
                    .replacingOccurrences(of: "arguments[0]", with: "'\(ready)'"))
                let fits = try await driver.run("""
                    return [innerWidth, document.documentElement.scrollWidth]
                    """) as? [Int] ?? []
                let widest = try await driver.run("""
                    let widest = '', right = 0
                    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT)
                    while (walker.nextNode()) {
                      const range = document.createRange(); range.selectNodeContents(walker.currentNode)
                      const r = range.getBoundingClientRect()
                      if (r.right > right) { right = r.right; widest = walker.currentNode.parentNode.tagName + ' ' + walker.currentNode.textContent.slice(0, 40) }
                    }
                    return widest + ' ends at ' + Math.round(right)
                    """) as? String ?? ""
                #expect(fits.count == 2 && fits[0] == width && fits[1] <= fits[0],
                        "the \(name) page at \(width) px: \(fits) (window, content); the widest: \(widest)")
                if name == "deactivated" {
                    let text = try await driver.text("#deactivated")
                    #expect(text.contains("unregistered") && text.contains("ana"), "\(text)")
                }
                try await shot("\(width)-\(name)")
            }
        }

        // Signing out forgets the key.
        try await driver.click("#signout")
        #expect(try await driver.run("return sessionStorage.length === 0 && !document.getElementById('signin').hidden")
            as? Bool == true)

        // A read-only key limited to one app: the console says so, and offers no test
        // push and no chart (which counts every app).
        try await driver.type("#key", APIKeyScopeTests.reader)
        try await driver.resize(width: 1440, height: 900)
        try await driver.click("#signin-form button[type=submit]")
        try await driver.waitFor("the key's name", "return document.getElementById('whoami').textContent.length > 0")
        #expect(try await driver.text("#whoami") == "Key reports (read, every app)")
        #expect(try await driver.run("return document.getElementById('nav-stats').hidden") as? Bool == false)
        try await driver.run("location.hash = '#/user/ana'")
        try await driver.waitFor("the user's devices", "return !!document.querySelector('#devices')")
        #expect(try await driver.run("return document.querySelectorAll('.send-test').length") as? Int == 0)
        try await shot("1440-read-key")
        try await driver.click("#signout")
        try await driver.type("#key", APIKeyScopeTests.staffSupport)
        try await driver.click("#signin-form button[type=submit]")
        try await driver.waitFor("the key's name", "return document.getElementById('whoami').textContent.length > 0")
        #expect(try await driver.text("#whoami") == "Key staff-desk (support, staff)")
        #expect(try await driver.run("return document.getElementById('nav-stats').hidden") as? Bool == true)
        try await driver.run("location.hash = '#/user/ana'")
        try await driver.waitFor("the test push button", "return !!document.querySelector('#devices .send-test')")
    }
}
