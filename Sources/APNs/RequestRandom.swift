/// The random numbers a batch draws per request (apns-id, backoff jitter):
/// xoshiro256** seeded once from the system generator.
///
/// `SystemRandomNumberGenerator` makes a getrandom(2) call per number, two per
/// request: measured at ~5% of apns-send's CPU. An apns-id needs to be unique,
/// not secret: 122 random bits from a 256-bit state seeded per batch are as
/// unlikely to repeat as the system's.
struct RequestRandom: RandomNumberGenerator {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    init() {
        var system = SystemRandomNumberGenerator()
        repeat {
            s = (system.next(), system.next(), system.next(), system.next())
        } while s == (0, 0, 0, 0)   // the one state xoshiro cannot leave
    }

    mutating func next() -> UInt64 {
        let result = rotl(s.1 &* 5, 7) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = rotl(s.3, 45)
        return result
    }

    /// k is 7 or 45: masking shifts, which compile to one rotate.
    private func rotl(_ x: UInt64, _ k: UInt64) -> UInt64 {
        (x &<< k) | (x &>> (64 &- k))
    }
}
