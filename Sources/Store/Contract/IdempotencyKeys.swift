/// What a request carrying an `Idempotency-Key` may do, as the store decided in
/// one transaction: the key's row is inserted first, and the unique (scope, key)
/// lets exactly one request hold it, whichever instance it reached.
public enum IdempotencyClaim: Sendable, Equatable {
    /// This request holds the key: do the work, naming what it creates
    /// `resourceID`. `resumed`: an earlier holder stopped (its lease ran out)
    /// without an answer, and may have committed that work already.
    case claimed(resourceID: String, resumed: Bool)
    /// Another request holds the key and has not answered yet.
    case busy(fingerprint: String)
    /// The key's first request finished: its answer, to give again.
    case answered(fingerprint: String, status: Int, body: [UInt8])
}

/// Idempotency keys: one row per (scope, key), kept from the first request until
/// retention prunes it. The work a key guards names its resource by the row's
/// `resourceID` (a notification's or a broadcast's id), whose own primary key
/// commits in the work's transaction: a holder that takes over a key whose first
/// holder died can never commit the same work twice.
public protocol IdempotencyKeys {
    /// Inserts the key for this request, or reads what it already holds. A row
    /// created before `expiredBefore` counts as absent (retention ended it; the
    /// pruner had not yet deleted it). A row held without an answer past its lease
    /// is taken over by a request with the same fingerprint.
    func claimIdempotencyKey(scope: String, key: String, fingerprint: String, resourceID: String,
                             now: Int64, leaseMillis: Int64,
                             expiredBefore: Int64) async throws(StoreError) -> IdempotencyClaim
    /// Records the answer of the request that holds the key.
    func answerIdempotencyKey(scope: String, key: String, resourceID: String,
                              status: Int, body: [UInt8]) async throws(StoreError)
    /// Forgets a key whose request stored nothing (refused, or failed before any
    /// work): a retry then runs as new.
    func releaseIdempotencyKey(scope: String, key: String, resourceID: String) async throws(StoreError)
    /// Retention: deletes up to `limit` keys created before `cutoff`; how many went.
    func pruneIdempotencyKeys(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int
}
