import Foundation
import Testing
import TestSupport

/// Requests that repeat an Idempotency-Key while its first request is still at work
/// wait for its answer without hammering the database: they are woken when it
/// answers in this process and otherwise look again at a growing interval. On
/// PostgreSQL, where the first request may be on another instance: the test holds
/// the first request's fan-out on a table lock and counts the duplicates' claims.
@Suite(.serverPostgres) struct IdempotencyWaitTests {
    @Test func duplicatesWaitingOnASlowFirstRequestBackOff() async throws {
        let production = try Harness.mock(sandbox: false)
        defer { production.stop() }
        let clock = FakeClock(at: "2026-06-01T12:00:00Z")
        try await withClockedServer(.postgres, production: production, clock: clock) { server in
            await BackendAPITests.register(server, user: "ana", token: Harness.tokens(1, seed: 4201)[0])
            let db = try server.files.database()
            defer { Task { await db.close() } }
            // Every claim of a key, answered or not, passes this trigger (a BEFORE
            // INSERT trigger runs for an INSERT … ON CONFLICT DO NOTHING too).
            try await db.execute("CREATE TABLE claims (n BIGINT NOT NULL)")
            try await db.execute("INSERT INTO claims VALUES (0)")
            try await db.execute("""
                CREATE FUNCTION count_claim() RETURNS trigger AS $$
                BEGIN UPDATE claims SET n = n + 1; RETURN NEW; END $$ LANGUAGE plpgsql
                """)
            try await db.execute("""
                CREATE TRIGGER count_claims BEFORE INSERT ON idempotency_keys FOR EACH ROW EXECUTE FUNCTION count_claim()
                """)
            // The first request's notification cannot be written for four seconds.
            let held = Task { try await db.execute("""
                DO $$ BEGIN LOCK TABLE notifications IN EXCLUSIVE MODE; PERFORM pg_sleep(4); END $$
                """) }
            try await Task.sleep(for: .milliseconds(500))
            let body = #"{"type":"order_status_changed","app_type":"staff","user_ids":["ana"],"alert":{"title":"Ready","body":"Order 9"}}"#
            let answers = await withTaskGroup(of: HTTPResponse.self) { group in
                for i in 0..<11 {
                    group.addTask {
                        // The first one first, so that the others find its key held.
                        if i > 0 { try? await Task.sleep(for: .milliseconds(300)) }
                        return await IdempotencyServerTests.post(server, "/v1/notifications", body, key: "order-9")
                    }
                }
                var all: [HTTPResponse] = []
                for await answer in group { all.append(answer) }
                return all
            }
            try await held.value
            // Each duplicate gets the first answer, or (on a machine so loaded that the
            // first takes longer than a duplicate waits) a 409 to retry: never a second
            // notification.
            let accepted = answers.filter { $0.status == 202 }
            #expect(!accepted.isEmpty && Set(accepted.map(\.body)).count == 1, "\(answers.map(\.status))")
            #expect(answers.allSatisfy { $0.status == 202 || $0.status == 409 }, "\(answers.map(\.status))")
            // Polling every 25 ms, ten duplicates over ~3.5 s would claim ~1,400 times;
            // backing off to a second, a few dozen.
            let claims = try #require(try await db.scalar("SELECT n FROM claims"))
            #expect(claims < 200, "\(claims) claims")
            try await server.drained()
            #expect(production.recordedRequests().count == 1)
        }
    }
}
