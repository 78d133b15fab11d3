/// `WaitViewStore`, once for both engines (statements and mapping in `WaitStatements`).
extension StoreEngine {
    public func outboxPlaces(apnsIDs: [String]) async throws(StoreError) -> [String: OutboxPlace] {
        guard !apnsIDs.isEmpty else { return [:] }
        return try await reading("read outbox places") { c in
            var places: [String: OutboxPlace] = [:]
            for row in try await c.rows(Statements.outboxPlaces, [StoreValue.list(apnsIDs)]) {
                let place = try OutboxPlace(row)
                places[place.apnsID] = place
            }
            return places
        }
    }

    public func notificationPayload(id: String) async throws(StoreError) -> [UInt8]? {
        try await reading("read notification \(id)'s payload") { c in
            try await c.row(Statements.notificationPayload, [id]).map { try $0.byteArray(0) }
        }
    }

    public func upcomingSchedules(appType: String?, limit: Int,
                                  after: TimeCursor?) async throws(StoreError) -> Page<ScheduleRow, TimeCursor> {
        try await reading("list upcoming schedules") { c in
            let cursor = after ?? Page<ScheduleRow, TimeCursor>.start
            let rows = try await c.rows(Statements.upcomingSchedules, [appType, cursor.millis, cursor.id, limit + 1])
                .map(ScheduleRow.init)
            return Page(upcoming: rows, limit: limit)
        }
    }
}
