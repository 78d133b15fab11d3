import Foundation
import GRDB

extension SQLiteTransaction {
    /// Writes `payloads` as rows of the notification; returns their ids, in order.
    func insertPayloads(notificationID: String, _ payloads: [[UInt8]]) async throws -> [Int64] {
        let insertPayload = try db.cachedStatement(sql: """
            INSERT INTO payloads (notification_id, bytes) VALUES (?, ?)
            """)
        var ids: [Int64] = []
        ids.reserveCapacity(payloads.count)
        for payload in payloads {
            try insertPayload.execute(arguments: [notificationID, Data(payload)])
            ids.append(db.lastInsertedRowID)
        }
        return ids
    }

    /// Writes the log rows of `deliveries` (nothing in the outbox); `payloadOf[i]` is
    /// delivery i's payload row. Multi-row inserts: one statement execution per 256.
    func insertDeliveryRows(notificationID: String, _ deliveries: [NewDelivery], payloadOf: [Int64],
                            now: Int64) async throws {
        let notificationID = notificationID.databaseValue
        let created = now.databaseValue
        let empty = Data().databaseValue
        try db.executeChunked(count: deliveries.count, maxRows: 256, sql: { rows in
            """
            INSERT INTO deliveries (notification_id, user_id, device_id, token, environment, apns_id, payload,
                                    payload_id, push_type, priority, collapse_id, expiration, created_at, not_before)
            VALUES \(placeholders(rows: rows, columns: 14))
            """
        }, bind: { i, values in
            let d = deliveries[i]
            values.append(notificationID)
            values.append(d.userID.databaseValue)
            values.append(d.deviceID.databaseValue)
            values.append(d.token.databaseValue)
            values.append(d.environment.databaseValue)
            values.append(d.apnsID.databaseValue)
            values.append(empty)
            values.append(payloadOf[i].databaseValue)
            values.append(d.pushType.databaseValue)
            values.append(d.priority.databaseValue)
            values.append(d.collapseID.databaseValue)
            values.append(d.expiration.databaseValue)
            values.append(created)
            values.append(d.notBefore.databaseValue)
        }, rows: nil)
    }
}
