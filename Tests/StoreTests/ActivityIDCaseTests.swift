import Foundation
import Testing
@testable import Store
import TestSupport

/// The step that puts activity ids in one case, on both engines: a UUID stored in
/// upper case becomes lower case in the owners and the tokens; of two spellings of
/// one id, the first registered keeps the activity; ids that are not UUIDs stay as
/// they were.
@Suite(.postgresCluster) struct ActivityIDCaseTests {
    @Test(arguments: StoreKind.allCases)
    func uuidActivityIDsAreLowerCasedAndTheFirstOwnerStays(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let upper = "6F0B8C2E-3D1A-4B5C-9E7F-1A2B3C4D5E6F", lower = upper.lowercased()
            let other = "0A1B2C3D-4E5F-4A6B-8C7D-9E0F1A2B3C4D"
            for (id, user) in [(1, "owner"), (2, "intruder"), (3, "solo"), (4, "named")] {
                try await store.execute("""
                    INSERT INTO devices (id, user_id, app_type, token, platform, environment, registered_at, created_at, updated_at)
                    VALUES (\(id), '\(user)', 'staff', 'la-token-\(id)', 'liveactivity', 'production', 0, 0, 0)
                    """)
            }
            try await store.execute("""
                INSERT INTO live_activities (app_type, activity_id, user_id, created_at) VALUES
                    ('staff', '\(upper)', 'owner', 10), ('staff', '\(lower)', 'intruder', 20),
                    ('staff', '\(other)', 'solo', 30), ('staff', 'Order-7', 'named', 40)
                """)
            try await store.execute("""
                INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type) VALUES
                    (1, 'update', '\(upper)', 'T'), (2, 'update', '\(lower)', 'T'),
                    (3, 'update', '\(other)', 'T'), (4, 'update', 'Order-7', 'T')
                """)
            switch kind {
            case .sqlite: try await store.execute(Schema.v20.sqlite)
            case .postgres: for statement in Schema.v20.postgres { try await store.execute(statement) }
            }
            let owners = try await store.texts("SELECT activity_id, user_id FROM live_activities ORDER BY created_at")
            #expect(owners == [[lower, "owner"], [other.lowercased(), "solo"], ["Order-7", "named"]])
            let tokens = try await store.texts("SELECT CAST(device_id AS TEXT), activity_id FROM live_activity_tokens ORDER BY device_id")
            #expect(tokens == [["1", lower], ["2", lower], ["3", other.lowercased()], ["4", "Order-7"]])
        }
    }
}
