import Foundation
import GRDB

extension SQLiteStore: IdempotencyKeys {
    public func claimIdempotencyKey(scope: String, key: String, fingerprint: String, resourceID: String,
                                    now: Int64, leaseMillis: Int64,
                                    expiredBefore: Int64) async throws(StoreError) -> IdempotencyClaim {
        try await write("claim an idempotency key") { db in
            try db.execute(sql: "DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND created_at < ?",
                           arguments: [scope, key, expiredBefore])
            try db.execute(sql: """
                INSERT INTO idempotency_keys (scope, idempotency_key, fingerprint, resource_id, created_at, claimed_until)
                VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (scope, idempotency_key) DO NOTHING
                """, arguments: [scope, key, fingerprint, resourceID, now, now + leaseMillis])
            if db.changesCount == 1 { return .claimed(resourceID: resourceID, resumed: false) }
            guard let row = try Row.fetchOne(db, sql: """
                SELECT fingerprint, resource_id, status, body, claimed_until FROM idempotency_keys WHERE scope = ? AND idempotency_key = ?
                """, arguments: [scope, key])
            else { throw StoreError("the idempotency key vanished while claimed") }
            let held: String = row[0]
            if let status: Int = row[2] {
                let body: [UInt8] = (row[3] as Data?).map { Array($0) } ?? []
                return .answered(fingerprint: held, status: status, body: body)
            }
            guard held == fingerprint, (row[4] as Int64) < now else { return .busy(fingerprint: held) }
            try db.execute(sql: "UPDATE idempotency_keys SET claimed_until = ? WHERE scope = ? AND idempotency_key = ?",
                           arguments: [now + leaseMillis, scope, key])
            return .claimed(resourceID: row[1], resumed: true)
        }
    }

    public func answerIdempotencyKey(scope: String, key: String, resourceID: String,
                                     status: Int, body: [UInt8]) async throws(StoreError) {
        try await write("record an idempotent answer") { db in
            try db.execute(sql: """
                UPDATE idempotency_keys SET status = ?, body = ? WHERE scope = ? AND idempotency_key = ? AND resource_id = ?
                """, arguments: [status, Data(body), scope, key, resourceID])
        }
    }

    public func releaseIdempotencyKey(scope: String, key: String, resourceID: String) async throws(StoreError) {
        try await write("release an idempotency key") { db in
            try db.execute(sql: """
                DELETE FROM idempotency_keys WHERE scope = ? AND idempotency_key = ? AND resource_id = ? AND status IS NULL
                """, arguments: [scope, key, resourceID])
        }
    }

    public func pruneIdempotencyKeys(before cutoff: Int64, limit: Int) async throws(StoreError) -> Int {
        try await write("prune idempotency keys") { db in
            try db.execute(sql: """
                DELETE FROM idempotency_keys WHERE rowid IN (
                    SELECT rowid FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)
                """, arguments: [cutoff, limit])
            return db.changesCount
        }
    }
}
