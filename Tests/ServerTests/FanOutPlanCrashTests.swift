import APNsMock
import Foundation
@testable import Store
import Testing
import TestSupport

/// A fan-out is planned and written a part at a time, and none of it enters the
/// outbox before its last part: the real binary, killed with SIGKILL while it plans,
/// has sent nothing, and the next start leaves nothing of that notification. The
/// backend never had its 202; the same request sent again reaches every device once.
@Suite(.serialized, .serverPostgres) struct FanOutPlanCrashTests {
    @Test(arguments: ServerStore.allCases)
    func killNineWhilePlanningSendsNothingAndLeavesNothing(_ kind: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false) { $0.recordCap = 50_000 }
        defer { production.stop() }
        var options = ServerProcess.Options()
        // Parts of 100 users: the plan takes 100 transactions, and the kill lands
        // between two of them.
        options.fanOutPart = 100
        // A dead instance's mark runs out after a lease (PostgreSQL; SQLite discards
        // every plan at start, being the only writer). Long enough that a loaded
        // machine renews every lease in time: a lease lost resends (same apns-id).
        options.leaseSeconds = kind == .postgres ? 10 : 30
        if kind == .postgres { options.database = try await ServerPostgresTrait.newDatabase() }
        let server = ServerProcess(sandbox: nil, production: production, options: options)
        // The test's own view of the server's database.
        let store = try server.database()
        defer { Task { await store.close() } }
        let scalar = { (sql: String) async throws -> Int64 in try await store.scalar(sql) ?? 0 }
        try await store.migrate()

        let count = 10_000
        let tokens = Harness.tokens(count, seed: 57)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        _ = try await store.register((0..<count).map {
            DeviceRegistration(userID: "plan-\($0)", companyID: "plan-co", token: tokens[$0], platform: "ios",
                               appType: "staff")
        }, maxActive: 20, now: now)
        try await server.start()
        let request = #"{"type":"order_created","app_type":"staff","company_id":"plan-co","alert":{"title":"t","body":"b"}}"#
        let post = Task { await server.backend("POST", "/v1/notifications", request) }

        // Killed once a part is written and while the plan is not complete. Watched
        // off the pool: other tests can hold it for longer than the whole plan takes.
        let planned = """
            SELECT count(*) FROM deliveries WHERE notification_id IN
                (SELECT id FROM notifications WHERE planning_until IS NOT NULL)
            """
        let seen = try await offPoolTask { () async throws -> Bool in
            let end = Date().addingTimeInterval(300)
            while Date() < end {
                if try await scalar(planned) > 0 {
                    #expect(await server.stop(SIGKILL) == SIGKILL)
                    return true
                }
                if try await scalar("SELECT count(*) FROM notifications WHERE planning_until IS NULL") > 0 {
                    Issue.record("the whole plan was written between two looks")
                    return false
                }
                try await Task.sleep(for: .milliseconds(2))
            }
            return false
        }
        guard seen else {
            Issue.record("no part written; the request's answer: \(await post.value.status)")
            return
        }
        #expect(await post.value.status != 202, "killed before its answer")
        let written = try await scalar(planned)
        #expect(written > 0 && written < Int64(count), "killed mid-plan (\(written) written)")
        #expect(try await scalar("SELECT count(*) FROM outbox") == 0, "none of a plan is in the outbox")
        #expect(production.statistics().requests == 0, "nothing sent")

        // A dead plan on a shared database is discarded once its mark ran out.
        if kind == .postgres { try await Task.sleep(for: .seconds(options.leaseSeconds + 1)) }
        try await server.start()
        defer { Task { await server.stop() } }
        #expect(try await scalar("SELECT count(*) FROM notifications") == 0)
        #expect(try await scalar("SELECT count(*) FROM deliveries") == 0)
        #expect(try await scalar("SELECT count(*) FROM payloads") == 0)
        #expect(server.stderr.contains("unfinished fan-outs discarded"))

        // The backend's retry: every device once.
        let r = await server.backend("POST", "/v1/notifications", request)
        #expect(r.status == 202)
        #expect(r.body.contains(#""deliveries":\#(count),"#), "\(r.body)")
        let id = try #require(r.json["notification_id"] as? String)
        try await server.drained(timeout: 300)
        let log = try #require(try await store.notification(id: id, limit: 1, after: nil))
        #expect(log.counts == ["delivered": count])
        var sends: [String: Int] = [:]
        for request in production.recordedRequests() { sends[try #require(request.token), default: 0] += 1 }
        #expect(sends.count == count, "every device")
        #expect(sends.values.filter { $0 > 1 }.isEmpty, "once each: \(sends.values.filter { $0 > 1 }.count) more than once")
    }
}
