import Foundation
import Testing
import TestSupport
@testable import Store

/// What a claim costs on PostgreSQL: 20,000 deliveries claimed in batches of 500 by
/// one worker, timed, and the plan of one batch (EXPLAIN ANALYZE). A measurement, not
/// a check (no time is asserted): it runs only when APNS_PG_MEASURE is set, and
/// prints its figures.
@Suite(.postgresCluster) struct PostgresClaimCostTests {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["APNS_PG_MEASURE"] != nil))
    func claimingTwentyThousandInBatchesOfFiveHundred() async throws {
        try await withPostgres { store in
            let total = 20_000, batch = 500
            let deliveries = (0..<total).map { i in
                NewDelivery(userID: "u\(i % 1_000)", deviceID: Int64(i), token: token(i), environment: "production",
                            apnsID: "m-\(i)", payload: Array(#"{"aps":{"alert":"hello","badge":\#(i % 10)}}"#.utf8))
            }
            let enqueueStart = ContinuousClock.now
            try await store.enqueue(NewNotification(id: "m", type: "t", entityType: nil, entityID: nil, appType: "staff"),
                                    deliveries, now: 1)
            let enqueueTime = ContinuousClock.now - enqueueStart
            try await store.execute("ANALYZE")

            // One batch's plan, at the head of a full outbox (it claims those 500).
            let plan = try await store.texts("""
                EXPLAIN (ANALYZE, BUFFERS) \(OutboxStatements.claimLeaseLocked.postgres
                    .replacingOccurrences(of: "$1", with: "2").replacingOccurrences(of: "$2", with: "\(batch)")
                    .replacingOccurrences(of: "$3", with: "600000").replacingOccurrences(of: "$4", with: "'explain'"))
                """).compactMap { $0.first ?? nil }

            var claimed = batch
            var times: [Duration] = []
            let start = ContinuousClock.now
            while true {
                let t0 = ContinuousClock.now
                let got = try await store.claim(worker: "w", limit: batch, leaseMillis: 600_000, now: 2)
                if got.isEmpty { break }
                times.append(ContinuousClock.now - t0)
                claimed += got.count
            }
            let elapsed = ContinuousClock.now - start
            #expect(claimed == total)
            let perDelivery = elapsed / (total - batch)
            let sorted = times.sorted()
            print("""
                claim cost: \(total - batch) deliveries in \(times.count) batches of \(batch): \(elapsed) in all, \
                \(perDelivery) per delivery; batch median \(sorted[sorted.count / 2]), max \(sorted.last!); \
                enqueue of \(total): \(enqueueTime)
                """)
            print(plan.joined(separator: "\n"))

            // The claim's second statement (what sending needs), for one batch's ids.
            let details = try await store.texts("""
                EXPLAIN (ANALYZE, BUFFERS) SELECT \(Statements.claimedColumns.postgres)
                FROM unnest(ARRAY(SELECT id FROM deliveries ORDER BY id LIMIT \(batch))) WITH ORDINALITY AS l (id, n)
                JOIN deliveries d ON d.id = l.id
                JOIN notifications n ON n.id = d.notification_id
                LEFT JOIN devices v ON v.id = d.device_id
                LEFT JOIN payloads p ON p.id = d.payload_id
                ORDER BY l.n
                """).compactMap { $0.first ?? nil }
            print(details.joined(separator: "\n"))
        }
    }
}
