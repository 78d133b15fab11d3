/// How a delivery waits with others of its device, in a window named by `key`
/// (one window per device, kind and key; `closesAt` ends it). Both kinds live in
/// the `holds` table and the outbox, never in memory: a restart finds them as they were.
public struct Hold: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Batching. The first delivery for the key opens a window and a carrier: a new
        /// delivery (this apns-id and collapse id, the member's payload and `notBefore`)
        /// that is the window's one send. Every delivery in the window, the first
        /// included, is a member: state `batched`, `carried_by` the carrier, which takes
        /// each new member's payload (the latest wins) and counts it in `batched`. A
        /// member's `notBefore` past `closesAt` (quiet hours) holds the carrier until then.
        case coalesce(carrierAPNsID: String, carrierCollapseID: String)
        /// Quiet hours' defer with a collapse id: a later deferred delivery for the same
        /// device and key replaces the one still held, which becomes `superseded`.
        case `defer`
    }

    public var kind: Kind
    public var key: String
    /// Until then, a delivery with the same device, kind and key joins this window.
    public var closesAt: Int64

    public init(kind: Kind, key: String, closesAt: Int64) {
        self.kind = kind
        self.key = key
        self.closesAt = closesAt
    }

    var kindName: String {
        switch kind {
        case .coalesce: "coalesce"
        case .defer: "defer"
        }
    }
}
