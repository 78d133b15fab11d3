/// A claimed delivery from its row: the columns `Statements.claimedColumns` selects,
/// in that order, on either engine.
struct ClaimMapping<Row: StoreRow> {
    private var payloads = SharedPayloads<Row.Bytes>()

    /// The delivery of `row`; rows read one after another share their payload's
    /// array where their bytes are the same.
    mutating func claimed(_ row: Row) throws -> ClaimedDelivery {
        let payload = payloads.payload(try row.bytes(7), copy: Row.array)
        return ClaimedDelivery(
            id: try row.int64(0), notificationID: try row.string(1), appType: try row.string(14),
            delivery: NewDelivery(
                userID: try row.string(2), deviceID: try row.int64(3), token: try row.string(4),
                environment: try row.string(5), apnsID: try row.string(6), payload: payload,
                pushType: try row.string(8), priority: try row.optionalInt(9), collapseID: try row.optionalString(10),
                expiration: try row.optionalInt64(11)),
            attempts: try row.int(12), crossEnvironmentTried: try row.bool(13), deviceActive: try row.bool(15),
            batched: try row.int(16))
    }
}
