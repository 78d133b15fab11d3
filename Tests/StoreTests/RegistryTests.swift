import Foundation
import Testing
import TestSupport
@testable import Store

/// Devices, preferences and the recipients a fan-out reads. Each behaviour runs on
/// both stores.
@Suite(.postgresCluster) struct RegistryTests {
    @Test(arguments: StoreKind.allCases)
    func registerIsAnUpsertThatMovesReactivatesAndRestampsTheToken(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.register(registration("u1", 1, company: "c1", name: "iPhone 15 Pro"), now: 100)
            let id = try #require(try await store.devices(userID: "u1").first?.id)
            #expect(try await store.unregister(userID: "u1", token: token(1), now: 150))

            // Another user signs in on the same phone: the row moves, comes back to life, is re-stamped.
            try await store.register(registration("u2", 1, company: "c2", environment: "sandbox"), now: 200)
            #expect(try await store.devices(userID: "u1").isEmpty)
            let rows = try await store.devices(userID: "u2")
            #expect(rows.count == 1)
            #expect(rows.first?.id == id)
            #expect(rows.first?.deviceName == nil, "the old owner's name is not the new owner's")
            #expect(rows.first?.createdAt == 200)
            #expect(try await store.scalar("SELECT count(*) FROM devices") == 1)
            #expect(try await store.scalar("SELECT registered_at FROM devices WHERE id = \(id)") == 200)
            #expect(try await store.scalar("SELECT count(*) FROM devices WHERE deactivated_at IS NULL AND is_active") == 1)
            let recipients = try await store.recipients(appType: "staff", audience: .company("c2"))
            #expect(recipients == [Recipient(userID: "u2", preferences: [:],
                                             devices: [.init(id: id, token: token(1), environment: "sandbox")])])

            // The same token in the other app is another device; upper case is the same token.
            try await store.register(registration("u2", 1, app: "customer"), now: 300)
            var upper = registration("u2", 1)
            upper.token = upper.token.uppercased()
            try await store.register(upper, now: 300)
            #expect(try await store.scalar("SELECT count(*) FROM devices") == 2)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func unregisterTouchesOnlyThisUsersActiveToken(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await register(store, "u1", 1)

            #expect(try await store.unregister(userID: "u2", token: token(1), now: 10) == false)
            #expect(try await store.unregister(userID: "u1", token: token(9), now: 10) == false)
            #expect(try await store.devices(userID: "u1").count == 1)

            #expect(try await store.unregister(userID: "u1", token: token(1), now: 10))
            #expect(try await store.unregister(userID: "u1", token: token(1), now: 11) == false)
            #expect(try await store.devices(userID: "u1").isEmpty)
            // A soft delete: kept for audit, with why and when.
            #expect(try await store.scalar("""
                SELECT count(*) FROM devices WHERE NOT is_active AND deactivated_reason = 'unregistered' AND deactivated_at = 10
                """) == 1)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func devicesListsActiveTokensNewestFirst(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let old = try await register(store, "u1", 1, now: 100)
            let android = try await register(store, "u1", 2, platform: "android", now: 200)
            let customer = try await register(store, "u1", 3, app: "customer", now: 300)
            try await register(store, "u1", 4, now: 400)
            _ = try await store.unregister(userID: "u1", token: token(4), now: 500)
            try await register(store, "u2", 5, now: 600)

            let rows = try await store.devices(userID: "u1")
            #expect(rows.map(\.id) == [customer, android, old])
            #expect(rows.map(\.platform) == ["ios", "android", "ios"])
            #expect(rows.first?.lastUsedAt == nil)
        }
    }

    @Test(arguments: StoreKind.allCases)
    func preferencesKeepSavedKeysPerUserAndApp(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.preferences(userID: "u1", appType: "staff") == [:])

            try await store.updatePreferences(userID: "u1", appType: "staff", ["newEnquiry": false], now: 1)
            try await store.updatePreferences(userID: "u1", appType: "staff",
                                              ["newEnquiry": true, "orderCreated": false], now: 2)
            // The same key in the other app is another preference.
            try await store.updatePreferences(userID: "u1", appType: "customer",
                                              ["notificationsEnabled": false, "orderCreated": true], now: 3)
            try await store.updatePreferences(userID: "u1", appType: "staff", [:], now: 4)

            #expect(try await store.preferences(userID: "u1", appType: "staff") == ["newEnquiry": true, "orderCreated": false])
            #expect(try await store.preferences(userID: "u1", appType: "customer")
                    == ["notificationsEnabled": false, "orderCreated": true])
            #expect(try await store.preferences(userID: "u2", appType: "staff") == [:])
            #expect(try await store.scalar("SELECT max(updated_at) FROM preferences WHERE app_type = 'staff'") == 2,
                    "an empty update writes nothing")

            // Settings are text beside the toggles; a key may change from one to the other.
            try await store.updatePreferences(userID: "u1", appType: "staff",
                                              ["quietHoursStart": "22:00", "orderCreated": "off"], now: 5)
            #expect(try await store.preferences(userID: "u1", appType: "staff")
                    == ["newEnquiry": true, "orderCreated": "off", "quietHoursStart": "22:00"])
            let recipients = try await store.recipients(appType: "staff", audience: .users(["u1"]))
            #expect(recipients.first?.preferences["quietHoursStart"] == "22:00")
        }
    }

    @Test(arguments: StoreKind.allCases)
    func recipientsByUsersKeepEveryNamedUserInOrderAndOnlyActiveIOSTokensOfTheApp(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let a = try await register(store, "u1", 1, now: 100)
            let b = try await register(store, "u1", 2, now: 200)
            try await register(store, "u1", 3, platform: "android")
            try await register(store, "u1", 4, app: "customer")
            try await register(store, "u1", 5)
            _ = try await store.unregister(userID: "u1", token: token(5), now: 300)
            try await register(store, "u2", 6)  // u2's only token, gone
            _ = try await store.unregister(userID: "u2", token: token(6), now: 300)
            try await register(store, "u3", 7)  // not named
            try await store.updatePreferences(userID: "u1", appType: "staff", ["orderCreated": false], now: 1)
            try await store.updatePreferences(userID: "u1", appType: "customer", ["orderCreated": true], now: 1)
            try await store.updatePreferences(userID: "u2", appType: "staff", ["notificationsEnabled": false], now: 1)

            let recipients = try await store.recipients(appType: "staff", audience: .users(["u2", "u1", "u2", "nobody"]))
            #expect(recipients == [
                Recipient(userID: "u2", preferences: ["notificationsEnabled": false], devices: []),
                Recipient(userID: "u1", preferences: ["orderCreated": false], devices: [
                    .init(id: b, token: token(2), environment: "production"),
                    .init(id: a, token: token(1), environment: "production"),
                ]),
                Recipient(userID: "nobody", preferences: [:], devices: []),
            ])
            #expect(try await store.recipients(appType: "staff", audience: .users([])) == [])
        }
    }

    @Test(arguments: StoreKind.allCases)
    func recipientsByCompanyAreUsersWithAnActiveTokenOfTheAppThere(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let u1 = try await register(store, "u1", 1, company: "c1")
            try await register(store, "u1", 2, company: "c2")                     // elsewhere: not this company's
            let u3 = try await register(store, "u3", 3, company: "c1")
            try await register(store, "u4", 4, platform: "android", company: "c1")  // in, with no iOS device
            try await register(store, "u5", 5, company: "c2")
            try await register(store, "u6", 6, app: "customer", company: "c1")
            try await register(store, "u7", 7, company: "c1")
            _ = try await store.unregister(userID: "u7", token: token(7), now: 5)
            let u8a = try await register(store, "u8", 8, company: "c1", now: 1)
            let u8b = try await register(store, "u8", 9, company: "c1", now: 2)
            try await store.updatePreferences(userID: "u3", appType: "staff", ["newEnquiry": false], now: 1)
            try await store.updatePreferences(userID: "u8", appType: "staff", ["newEnquiry": false, "quote": true], now: 1)
            try await store.updatePreferences(userID: "u1", appType: "customer", ["newEnquiry": false], now: 1)

            let recipients = try await store.recipients(appType: "staff", audience: .company("c1"))
            #expect(recipients == [
                Recipient(userID: "u1", preferences: [:], devices: [.init(id: u1, token: token(1), environment: "production")]),
                Recipient(userID: "u3", preferences: ["newEnquiry": false],
                          devices: [.init(id: u3, token: token(3), environment: "production")]),
                Recipient(userID: "u4", preferences: [:], devices: []),
                // Two devices: the preferences once, the newest registration first.
                Recipient(userID: "u8", preferences: ["newEnquiry": false, "quote": true],
                          devices: [.init(id: u8b, token: token(9), environment: "production"),
                                    .init(id: u8a, token: token(8), environment: "production")]),
            ])
            #expect(try await store.recipients(appType: "staff", audience: .company("none")) == [])
        }
    }

    /// On SQLite, a company's devices come out of `devices_by_company` in the order the
    /// fan-out reads them: no walk of every company's devices, no sort.
    @Test func aCompanysDevicesAreReadInIndexOrder() async throws {
        let scratch = Scratch()
        defer { withExtendedLifetime(scratch) {} }
        let store = try await makeStore(scratch)
        let plan = try await store.queryPlan(SQLiteStore.companyDevicesSQL, arguments: ["c1", "staff"])
        #expect(plan.contains { $0.contains("devices_by_company") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }
}
