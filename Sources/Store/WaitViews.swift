import GRDB

// `WaitViewStore` on SQLite (statements and mapping in `WaitStatements`).

extension SQLiteStore {
    public func outboxPlaces(apnsIDs: [String]) async throws(StoreError) -> [String: OutboxPlace] {
        guard !apnsIDs.isEmpty else { return [:] }
        return try await read("read outbox places") { db in
            var places: [String: OutboxPlace] = [:]
            for row in try Row.fetchAll(db, sql: Statements.outboxPlaces.sqlite, arguments: [jsonArray(apnsIDs)]) {
                let place = try OutboxPlace(row)
                places[place.apnsID] = place
            }
            return places
        }
    }

    public func notificationPayload(id: String) async throws(StoreError) -> [UInt8]? {
        try await read("read notification \(id)'s payload") { db in
            try Row.fetchOne(db, sql: Statements.notificationPayload.sqlite, arguments: [id]).map { Row.array($0.bytes(0)) }
        }
    }

    public func upcomingSchedules(appType: String?, limit: Int,
                                  after: TimeCursor?) async throws(StoreError) -> Page<ScheduleRow, TimeCursor> {
        try await read("list upcoming schedules") { db in
            let cursor = after ?? Page<ScheduleRow, TimeCursor>.start
            let rows = try Row.fetchAll(db, sql: Statements.upcomingSchedules.sqlite,
                                        arguments: [appType, cursor.millis, cursor.id, limit + 1]).map(ScheduleRow.init)
            return Page(upcoming: rows, limit: limit)
        }
    }
}
