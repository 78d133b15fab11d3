import Foundation
import Testing
import TestSupport
@testable import Store

/// Scheduled sends (`ScheduledSends`), one body on both stores: due ones only, one
/// worker each whatever the race, a dead worker's taken again after its lease, a
/// `schedule_key` superseding the pending one, cancel only while waiting, pruning.
@Suite(.postgresCluster) struct ScheduleStoreTests {
    static func schedule(_ id: String, at: Int64, key: String? = nil, kind: String = "notification") -> NewSchedule {
        NewSchedule(id: id, kind: kind, appType: "staff", type: "reminder", scheduleKey: key,
                    request: Array(#"{"id":"\#(id)"}"#.utf8), sendAt: at)
    }

    @Test(arguments: StoreKind.allCases) func dueOnesAreClaimedOnceAndFinished(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.schedule(Self.schedule("a", at: 1_000), now: 10) == nil)
            #expect(try await store.schedule(Self.schedule("b", at: 2_000), now: 10) == nil)
            #expect(try await store.pendingSchedules() == 2)
            #expect(try await store.claimDueSchedules(worker: "w1", limit: 10, leaseMillis: 500, now: 999).isEmpty)
            let due = try await store.claimDueSchedules(worker: "w1", limit: 10, leaseMillis: 500, now: 1_000)
            #expect(due.map(\.schedule.id) == ["a"] && due[0].state == "sending")
            #expect(due[0].schedule.request == Array(#"{"id":"a"}"#.utf8))
            // Held: not claimed again within the lease; taken by another after it.
            #expect(try await store.claimDueSchedules(worker: "w2", limit: 10, leaseMillis: 500, now: 1_400).isEmpty)
            let retaken = try await store.claimDueSchedules(worker: "w2", limit: 10, leaseMillis: 500, now: 1_500)
            #expect(retaken.map(\.schedule.id) == ["a"])
            #expect(try await store.finishSchedule(id: "a", worker: "w1", state: "sent", error: nil, now: 1_600) == false,
                    "w1 lost it")
            #expect(try await store.finishSchedule(id: "a", worker: "w2", state: "sent", error: nil, now: 1_600))
            #expect(try await store.scheduled(id: "a")?.state == "sent")
            #expect(try await store.claimDueSchedules(worker: "w1", limit: 10, leaseMillis: 500, now: 1_700).isEmpty)
            #expect(try await store.pendingSchedules() == 1)
        }
    }

    @Test(arguments: StoreKind.allCases) func racingWorkersTakeEachScheduleOnce(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 3) { stores in
            for n in 0..<30 { _ = try await stores[0].schedule(Self.schedule("s\(n)", at: 100), now: 1) }
            let taken = try await withThrowingTaskGroup(of: [String].self) { group in
                for (i, store) in stores.enumerated() {
                    group.addTask {
                        var mine: [String] = []
                        while true {
                            let got = try await store.claimDueSchedules(worker: "w\(i)", limit: 4, leaseMillis: 60_000, now: 200)
                            if got.isEmpty { return mine }
                            mine += got.map(\.schedule.id)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(taken.count == 30 && Set(taken).count == 30, "\(taken)")
        }
    }

    @Test(arguments: StoreKind.allCases) func aKeySupersedesAndCancelOnlyWhileWaiting(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.schedule(Self.schedule("old", at: 5_000, key: "trip-9/event-4"), now: 10) == nil)
            #expect(try await store.schedule(Self.schedule("new", at: 6_000, key: "trip-9/event-4"), now: 20) == "old")
            #expect(try await store.schedule(Self.schedule("other", at: 5_000, key: "trip-9/event-5"), now: 20) == nil)
            let old = try #require(try await store.scheduled(id: "old"))
            #expect(old.state == "superseded" && old.supersededBy == "new" && old.finishedAt == 20)
            // A superseded one is not sent, nor cancelled.
            #expect(try await store.cancelSchedule(id: "old", now: 30)?.state == "superseded")
            #expect(try await store.cancelSchedule(id: "other", now: 30)?.state == "cancelled")
            #expect(try await store.cancelSchedule(id: "nothing", now: 30) == nil)
            let due = try await store.claimDueSchedules(worker: "w", limit: 10, leaseMillis: 500, now: 10_000)
            #expect(due.map(\.schedule.id) == ["new"])
            // Being sent: too late to cancel; a newer one with the key is a new pending one.
            #expect(try await store.cancelSchedule(id: "new", now: 10_001)?.state == "sending")
            #expect(try await store.schedule(Self.schedule("newer", at: 20_000, key: "trip-9/event-4"), now: 10_002) == nil)

            // Final ones go after retention; waiting and held ones never.
            #expect(try await store.pruneSchedules(before: 25, limit: 10) == 1, "old (finished at 20)")
            #expect(try await store.pruneSchedules(before: 100_000, limit: 10) == 1, "other (cancelled at 30)")
            #expect(try await store.scalar("SELECT count(*) FROM scheduled_notifications") == 2)
        }
    }

    /// Many schedules with one key at once, over two instances: every one is stored,
    /// and each supersedes the one stored before it, so that they form one chain
    /// with the last one pending.
    @Test(arguments: StoreKind.allCases) func schedulesWithOneKeyAtOnceEachSupersedeTheOneBefore(_ kind: StoreKind) async throws {
        try await withStore(kind, instances: 2) { stores in
            let count = 36
            let superseded = try await withThrowingTaskGroup(of: (String, String?).self) { group in
                for n in 0..<count {
                    let store = stores[n % stores.count]
                    group.addTask {
                        ("s\(n)", try await store.schedule(Self.schedule("s\(n)", at: 100_000, key: "trip-1"), now: 10))
                    }
                }
                return try await group.reduce(into: [String: String?]()) { $0[$1.0] = $1.1 }
            }
            #expect(superseded.count == count)
            // Each one superseded at most once, by one other: a chain from the first to the last.
            let olds = superseded.values.compactMap { $0 }
            #expect(olds.count == count - 1 && Set(olds).count == count - 1, "\(superseded)")
            let last = try #require(Set(superseded.keys).subtracting(olds).first)
            #expect(try await stores[0].scheduled(id: last)?.state == "scheduled")
            for (id, old) in superseded {
                guard let old else { continue }
                let row = try #require(try await stores[1].scheduled(id: old))
                #expect(row.state == "superseded" && row.supersededBy == id, "\(old)")
            }
            #expect(try await stores[0].pendingSchedules() == 1)
        }
    }

    /// A key names a schedule of one kind: a Live Activity's never supersedes a
    /// notification's with the same key, nor the other way round.
    @Test(arguments: StoreKind.allCases) func aKeyIsApartForNotificationsAndLiveActivities(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.schedule(Self.schedule("n1", at: 5_000, key: "event-4"), now: 10) == nil)
            #expect(try await store.schedule(Self.schedule("la1", at: 5_000, key: "event-4", kind: "live_activity"),
                                             now: 11) == nil)
            #expect(try await store.scheduled(id: "n1")?.state == "scheduled")
            #expect(try await store.schedule(Self.schedule("n2", at: 6_000, key: "event-4"), now: 12) == "n1")
            #expect(try await store.scheduled(id: "la1")?.state == "scheduled")
            #expect(try await store.schedule(Self.schedule("la2", at: 6_000, key: "event-4", kind: "live_activity"),
                                             now: 13) == "la1")
            #expect(try await store.scheduled(id: "n2")?.state == "scheduled")
            let pending = try await store.pendingSchedules()
            #expect(pending == 2)
        }
    }
}
