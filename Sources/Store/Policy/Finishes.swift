/// What a batch of final outcomes records, once for both engines. Leaving the
/// outbox is the proof of holding a delivery: a second finish, or one from a
/// worker whose row another has claimed, takes nothing out of it, and its outcome
/// is ignored (a delivery made final by a hold, batched or superseded, has left the
/// outbox too).
enum Finishes {
    /// The outcomes of the deliveries this finish took out of the outbox (`left`),
    /// once each, in order: a duplicate outcome in the batch is ignored.
    static func held(_ outcomes: [DeliveryOutcome], left: Set<Int64>) -> [DeliveryOutcome] {
        var left = left
        return outcomes.filter { left.remove($0.deliveryID) != nil }
    }

    /// The log's state for an outcome.
    static func state(_ outcome: DeliveryOutcome) -> String {
        outcome.delivered ? "delivered" : "failed"
    }

    /// What the recorded outcomes (`isRecorded`: their answer went into the log now,
    /// not by an earlier finish) do to their devices, by delivery id, in order: the
    /// delivered ones' devices were used now; some answers change their token.
    static func deviceEffects(_ held: [DeliveryOutcome], isRecorded: (Int64) -> Bool)
        -> (used: [Int64], changes: [(deliveryID: Int64, change: DeliveryOutcome.TokenChange, timestamp: Int64?)]) {
        var used: [Int64] = []
        var changes: [(deliveryID: Int64, change: DeliveryOutcome.TokenChange, timestamp: Int64?)] = []
        for outcome in held where isRecorded(outcome.deliveryID) {
            if outcome.delivered { used.append(outcome.deliveryID) }
            if let change = outcome.tokenChange { changes.append((outcome.deliveryID, change, outcome.timestamp)) }
        }
        return (used, changes)
    }

    /// How many outcomes of the batch were ignored, `recorded` of them having been written.
    static func ignored(_ outcomes: [DeliveryOutcome], recorded: Int) -> Int {
        outcomes.count - recorded
    }
}
