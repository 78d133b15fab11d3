import Foundation
import Store
import TestSupport

/// A migrated store on a fresh file in a scratch folder (removed with the Scratch).
func makeStore(_ scratch: Scratch, _ name: String = "apns.db") async throws -> SQLiteStore {
    let store = try SQLiteStore(path: scratch.path(name))
    try await store.migrate()
    return store
}
