import APNsMock
import Foundation
import Store
import Testing
import TestSupport

/// A fan-out whose fifth part of ten cannot be written (a trigger on one user's
/// delivery stands in for a full disk) fails whole: a 500, and nothing of it is
/// left or sent. The part fails while the next page is being read ahead, so the
/// request ends that read before it answers. The same request sent again, once the
/// disk is "freed", reaches every device once.
@Suite(.serialized, .serverPostgres) struct FanOutPartFailureTests {
    static let users = 1_000

    @Test(arguments: ServerStore.allCases)
    func aPartThatCannotBeWrittenLeavesNothingAndSendsNothing(_ kind: ServerStore) async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        var options = ServerProcess.Options()
        options.fanOutPart = 100
        if kind == .postgres { options.database = try await ServerPostgresTrait.newDatabase() }
        let server = InProcessServer(sandbox: nil, production: production, options: options)
        try await server.start()
        let database = try server.files.database()
        defer {
            Task {
                await server.stop()
                await database.close()
            }
        }

        // Users in the order the plan reads a company (by user id), 100 a part.
        let tokens = Harness.tokens(Self.users, seed: 91)
        let user = { (i: Int) in String(format: "part-%04d", i) }
        let devices = (0..<Self.users).map {
            #"{"user_id":"\#(user($0))","company_id":"parts","deviceToken":"\#(tokens[$0])","platform":"ios","appType":"staff"}"#
        }
        let registered = await server.backend("POST", "/v1/device-tokens",
                                              #"{"devices":[\#(devices.joined(separator: ","))]}"#)
        #expect(registered.status == 200, "\(registered.body)")

        // The fifth part (users 400 to 499) holds the failing row.
        let failing = user(450)
        let engine: DiskFullTrigger.Engine = kind == .sqlite ? .sqlite : .postgres
        for sql in DiskFullTrigger.create(engine, table: "deliveries", column: "user_id", value: failing) {
            try await database.execute(sql)
        }
        let request = #"{"type":"order_created","app_type":"staff","company_id":"parts","alert":{"title":"t","body":"b"}}"#
        let failed = await server.backend("POST", "/v1/notifications", request)
        #expect(failed.status == 500, "\(failed.status) \(failed.body)")
        #expect(failed.body == #"{"success":false,"error":"internal error"}"#)
        for table in ["notifications", "deliveries", "payloads", "outbox", "delivery_events"] {
            #expect(try await database.scalar("SELECT count(*) FROM \(table)") == 0, "nothing left in \(table)")
        }
        // Nothing was in the outbox, so nothing can have gone; a moment for a worker
        // that would wrongly have found something.
        try await Task.sleep(for: .milliseconds(300))
        #expect(production.statistics().requests == 0, "nothing sent")

        // The disk freed, the backend's retry: every device once.
        try await database.execute(DiskFullTrigger.drop(engine, table: "deliveries"))
        let retried = await server.backend("POST", "/v1/notifications", request)
        #expect(retried.status == 202, "\(retried.body)")
        #expect(retried.body.contains(#""deliveries":\#(Self.users),"#), "\(retried.body)")
        try await server.drained()
        var sends: [String: Int] = [:]
        for request in production.recordedRequests() { sends[try #require(request.token), default: 0] += 1 }
        #expect(sends.count == Self.users, "every device")
        #expect(sends.values.allSatisfy { $0 == 1 }, "once each")
    }
}
