/// How transient failures are sent again: capped exponential backoff with jitter,
/// the same apns-id on every attempt, and a bound on attempts per token.
public struct RetryPolicy: Sendable, Hashable {
    /// Attempts per token in all, the first included.
    public var maxAttempts: Int
    /// The wait before the second attempt; each later wait doubles it.
    public var initialBackoff: Duration
    /// The longest wait, however many attempts failed.
    public var maxBackoff: Duration
    /// Each wait is drawn from [(1 - jitter) * backoff, backoff], so that many tokens
    /// refused at once do not return at once.
    public var jitter: Double

    /// A policy; `maxAttempts` below 1 counts as 1, `jitter` is clamped to 0...1.
    public init(maxAttempts: Int = 6, initialBackoff: Duration = .milliseconds(200),
                maxBackoff: Duration = .seconds(30), jitter: Double = 0.5) {
        self.maxAttempts = max(1, maxAttempts)
        self.initialBackoff = initialBackoff
        self.maxBackoff = maxBackoff
        self.jitter = min(max(jitter, 0), 1)
    }

    /// Six attempts, 200 ms doubling up to 30 s, jitter 0.5.
    public static let `default` = RetryPolicy()


    /// The wait before attempt number `attempt + 1`, after `attempt` failed ones.
    func backoff<G: RandomNumberGenerator>(afterAttempt attempt: Int, using rng: inout G) -> Duration {
        let exponent = min(max(attempt - 1, 0), 30)
        let full = min(initialBackoff * (1 << exponent), maxBackoff)
        let factor = 1 - jitter * Double.random(in: 0...1, using: &rng)
        return full * factor
    }
}
