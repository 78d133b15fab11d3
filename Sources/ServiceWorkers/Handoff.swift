import ServiceDelivery
import Store
import Synchronization

/// Fresh deliveries, from the enqueue straight to a worker loop of this process.
///
/// A fan-out's deliveries are leased to one loop a page at a time once its plan is
/// complete (`FanOutPlans.leaseFanOutPage`) and handed to it here,
/// so they go out without a claim query per batch: on SQLite's single writer the
/// claims of a 100k fan-out cost about as much as writing it. The loop still sends
/// them in batches, holds them under its lease (renewed), and records them as it
/// does what it claims; a crash leaves them leased in the outbox, and they are sent
/// again when the lease runs out, as claimed ones are.
///
/// Only for an outbox this process has to itself (SQLite): on a shared database
/// every instance claims its share of a notification, which a hand-off to the
/// instance that took the request would undo.
///
/// Bounded: a loop is handed at most `limit` deliveries it has not taken yet. A
/// loop takes only as fast as APNs answers, and fan-outs can come faster (or APNs
/// not answer at all); past the bound a fan-out's deliveries stay in the outbox,
/// unleased, and are claimed as any others, so memory does not grow with the backlog.
package final class Handoff: DeliveryHandoff {
    private struct Mailbox {
        let held: HeldSet
        var batches: [[ClaimedDelivery]] = []
        var queued = 0
    }

    private struct State {
        var mailboxes: [String: Mailbox] = [:]
        /// Open loops, in the order they take turns.
        var order: [String] = []
        var turn = 0
    }

    private let state = Mutex(State())
    private let batchSize: Int
    package let limit: Int
    private let wakeup: WorkerWakeup

    package init(batchSize: Int, limit: Int, wakeup: WorkerWakeup) {
        self.batchSize = batchSize
        self.limit = limit
        self.wakeup = wakeup
    }

    /// The loop to lease the next fan-out to, in turn among those with room; nil
    /// when none has room or none runs (stopping): the fan-out is left to claims.
    package func lessee() -> String? {
        state.withLock { s in
            for _ in s.order.indices {
                s.turn = (s.turn + 1) % s.order.count
                let worker = s.order[s.turn]
                if s.mailboxes[worker]!.queued < limit { return worker }
            }
            return nil
        }
    }

    /// Gives `claimed`, leased to `worker`, to that loop, as many as its room allows.
    /// Returns those it did not take (all of them when the loop has stopped since it
    /// was chosen): the caller gives them back to the outbox, to be claimed.
    package func deliver(_ claimed: [ClaimedDelivery], to worker: String) -> ArraySlice<ClaimedDelivery> {
        guard !claimed.isEmpty else { return [] }
        let taken = state.withLock { s -> Int in
            guard let mailbox = s.mailboxes[worker] else { return 0 }
            let taken = min(claimed.count, max(0, limit - mailbox.queued))
            guard taken > 0 else { return 0 }
            // Held from now on: the loop's lease renewal covers them while they wait.
            s.mailboxes[worker]!.held.insert(claimed[..<taken].map(\.id))
            for start in stride(from: 0, to: taken, by: batchSize) {
                s.mailboxes[worker]!.batches.append(Array(claimed[start..<min(start + batchSize, taken)]))
            }
            s.mailboxes[worker]!.queued += taken
            return taken
        }
        if taken > 0 { wakeup.wake() }
        return claimed[taken...]
    }

    /// A loop starts taking hand-offs.
    func open(_ worker: String, held: HeldSet) {
        state.withLock { s in
            s.mailboxes[worker] = Mailbox(held: held)
            s.order.append(worker)
        }
    }

    /// The next batch handed to `worker`, if any.
    func take(_ worker: String) -> [ClaimedDelivery]? {
        state.withLock { s in
            guard s.mailboxes[worker]?.batches.isEmpty == false else { return nil }
            let batch = s.mailboxes[worker]!.batches.removeFirst()
            s.mailboxes[worker]!.queued -= batch.count
            return batch
        }
    }

    /// `worker` takes hand-offs (it has not stopped).
    package func isOpen(_ worker: String) -> Bool {
        state.withLock { $0.mailboxes[worker] != nil }
    }

    /// Handed to `worker` and not yet taken.
    package func queued(_ worker: String) -> Int {
        state.withLock { $0.mailboxes[worker]?.queued ?? 0 }
    }

    /// A loop stops taking hand-offs; what it was handed and never took comes back.
    func close(_ worker: String) -> [ClaimedDelivery] {
        state.withLock { s in
            s.order.removeAll { $0 == worker }
            s.turn = 0
            return s.mailboxes.removeValue(forKey: worker)?.batches.flatMap { $0 } ?? []
        }
    }
}
