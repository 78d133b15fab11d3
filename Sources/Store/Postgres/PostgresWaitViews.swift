import PostgresNIO

// `WaitViewStore` on PostgreSQL (statements and mapping in `WaitStatements`).

extension PostgresStore {
    public func outboxPlaces(apnsIDs: [String]) async throws(StoreError) -> [String: OutboxPlace] {
        guard !apnsIDs.isEmpty else { return [:] }
        return try await transaction("read outbox places") { db in
            var binds = PostgresBindings(capacity: 1)
            binds.append(apnsIDs)
            var places: [String: OutboxPlace] = [:]
            for row in try await db.rows(PostgresQuery(unsafeSQL: Statements.outboxPlaces.postgres, binds: binds)) {
                let place = try OutboxPlace(row)
                places[place.apnsID] = place
            }
            return places
        }
    }

    public func notificationPayload(id: String) async throws(StoreError) -> [UInt8]? {
        try await transaction("read notification \(id)'s payload") { db in
            var binds = PostgresBindings(capacity: 1)
            binds.append(id)
            return try await db.rows(PostgresQuery(unsafeSQL: Statements.notificationPayload.postgres, binds: binds))
                .first.map { PostgresRandomAccessRow.array(try $0.bytes(0)) }
        }
    }

    public func upcomingSchedules(appType: String?, limit: Int,
                                  after: TimeCursor?) async throws(StoreError) -> Page<ScheduleRow, TimeCursor> {
        try await transaction("list upcoming schedules") { db in
            let cursor = after ?? Page<ScheduleRow, TimeCursor>.start
            var binds = PostgresBindings(capacity: 4)
            binds.append(appType)
            binds.append(cursor.millis)
            binds.append(cursor.id)
            binds.append(Int64(limit) + 1)
            let rows = try await db.rows(PostgresQuery(unsafeSQL: Statements.upcomingSchedules.postgres, binds: binds))
                .map(ScheduleRow.init)
            return Page(upcoming: rows, limit: limit)
        }
    }
}
