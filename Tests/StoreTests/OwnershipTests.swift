import Foundation
import Testing
import TestSupport
@testable import Store

/// Whose tokens, activities and channels are whose: an activity is its first
/// registrant's, a token that changes hands keeps nothing of its old owner, device
/// and Live Activity tokens never turn into each other, a user's active tokens are
/// capped, long-inactive ones are pruned, a list of registrations is stored whole or
/// not at all, and a channel's id reaches only the audience the backend named.
/// Each runs on both stores.
@Suite(.postgresCluster) struct OwnershipTests {
    static func activity(_ user: String, _ n: Int, _ id: String?, app: String = "staff") -> LiveActivityRegistration {
        LiveActivityRegistration(userID: user, token: token(n), appType: app,
                                 kind: id.map { .update(activityID: $0) } ?? .start, attributesType: "Attrs")
    }

    static func rows(_ store: some TestStore, token n: Int) async throws -> Int64? {
        try await store.scalar("SELECT count(*) FROM devices WHERE token = '\(token(n))'")
    }

    @Test(arguments: StoreKind.allCases) func anActivityBelongsToTheUserWhoFirstRegisteredIt(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            #expect(try await store.registerLiveActivity(Self.activity("alice", 1, "act-A"), now: 1) == nil)
            #expect(try await store.registerLiveActivity(Self.activity("bob", 2, "act-A"), now: 2)
                    == RegistrationRefusal(.activityOfAnotherUser))
            #expect(try await Self.rows(store, token: 2) == 0, "the refused token is not stored")
            // Nor may bob take alice's token over for her activity.
            #expect(try await store.registerLiveActivity(Self.activity("bob", 1, "act-A"), now: 3)
                    == RegistrationRefusal(.activityOfAnotherUser))
            #expect(try await store.liveActivityTokens(userID: "alice").map(\.token) == [token(1)])
            // Alice's second device joins her activity; the same id in another app is another activity.
            #expect(try await store.registerLiveActivity(Self.activity("alice", 3, "act-A"), now: 4) == nil)
            #expect(try await store.registerLiveActivity(Self.activity("bob", 4, "act-A", app: "customer"), now: 5) == nil)

            let targets = try await store.liveActivityTokens(appType: "staff", .activity("act-A"))
            #expect(Set(targets.map(\.token)) == [token(1), token(3)])
            #expect(targets.allSatisfy { $0.userID == "alice" })
            #expect(try await store.liveActivityTokens(appType: "customer", .activity("act-A")).map(\.userID) == ["bob"])
        }
    }

    @Test(arguments: StoreKind.allCases) func aTokenThatChangesHandsKeepsNothingOfItsOldOwner(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await store.register(DeviceRegistration(userID: "u1", token: token(1), platform: "ios", appType: "staff",
                                                        deviceName: "Alice's iPhone", osVersion: "17.4", appVersion: "1.0"),
                                     now: 100)
            let device = try #require(try await store.devices(userID: "u1").first?.id)
            try await enqueue(store, "n", [("u1", device)], now: 100)
            let claimed = try #require(try await store.claim(worker: "w", limit: 1, leaseMillis: 1_000, now: 110).first)
            #expect(try await store.finish(worker: "w", [delivered(claimed.id, at: 120)], now: 120) == 0)
            // The same user's refresh without details keeps them.
            try await store.register(registration("u1", 1), now: 130)
            let kept = try #require(try await store.devices(userID: "u1").first)
            #expect(kept.deviceName == "Alice's iPhone" && kept.osVersion == "17.4" && kept.appVersion == "1.0")
            #expect(kept.lastUsedAt == 120 && kept.createdAt == 100)

            // Another user's registration: only what they sent.
            try await store.register(registration("u2", 1), now: 200)
            let moved = try #require(try await store.devices(userID: "u2").first)
            #expect(moved.id == device, "the same row, moved")
            #expect(moved.deviceName == nil && moved.osVersion == nil && moved.appVersion == nil)
            #expect(moved.lastUsedAt == nil && moved.createdAt == 200)
            try await store.register(DeviceRegistration(userID: "u3", token: token(1), platform: "ios", appType: "staff",
                                                        deviceName: "Bob's iPhone", osVersion: "18.0"), now: 300)
            let again = try #require(try await store.devices(userID: "u3").first)
            #expect(again.deviceName == "Bob's iPhone" && again.osVersion == "18.0" && again.appVersion == nil)

            // A Live Activity token changing hands: its creation is the new owner's too.
            try await store.registerLiveActivity(Self.activity("u1", 2, nil), now: 400)
            try await store.registerLiveActivity(Self.activity("u2", 2, nil), now: 500)
            #expect(try await store.liveActivityTokens(userID: "u2").map(\.createdAt) == [500])
        }
    }

    @Test(arguments: StoreKind.allCases) func deviceAndLiveActivityTokensNeverTurnIntoEachOther(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await register(store, "u1", 1)
            for user in ["u1", "u2"] {
                #expect(try await store.registerLiveActivity(Self.activity(user, 1, "act-1"), now: 2)
                        == RegistrationRefusal(.otherKind))
                #expect(try await store.registerLiveActivity(Self.activity(user, 1, nil), now: 2)
                        == RegistrationRefusal(.otherKind))
            }
            #expect(try await store.devices(userID: "u1").count == 1)
            #expect(try await store.scalar("SELECT count(*) FROM live_activity_tokens") == 0)
            #expect(try await store.scalar("SELECT count(*) FROM live_activities") == 0, "the refusal stored no owner")

            try await store.registerLiveActivity(Self.activity("u1", 2, nil), now: 3)
            for user in ["u1", "u2"] {
                #expect(try await store.register(registration(user, 2), now: 4) == RegistrationRefusal(.otherKind))
            }
            #expect(try await store.liveActivityTokens(userID: "u1").map(\.token) == [token(2)])
            #expect(try await store.devices(userID: "u2").isEmpty)

            // Logged out, a token is still its kind.
            #expect(try await store.unregister(userID: "u1", token: token(1), now: 5))
            #expect(try await store.registerLiveActivity(Self.activity("u1", 1, nil), now: 6) == RegistrationRefusal(.otherKind))
            #expect(try await store.scalar("SELECT count(*) FROM devices WHERE platform = 'liveactivity'") == 1)
        }
    }

    @Test(arguments: StoreKind.allCases) func aUsersActiveTokensAreCappedTheOldestGoing(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            for n in 1...5 {
                #expect(try await store.register([registration("u1", n)], maxActive: 3, now: Int64(n)) == nil)
            }
            #expect(try await store.devices(userID: "u1").map(\.id) == [5, 4, 3])
            #expect(try await store.recipients(appType: "staff", audience: .users(["u1"])).first?.devices.count == 3)
            #expect(try await store.scalar("""
                SELECT count(*) FROM devices WHERE token IN ('\(token(1))', '\(token(2))')
                  AND NOT is_active AND deactivated_reason = 'replaced'
                """) == 2)
            // Another user's, another app's and Live Activity tokens count apart.
            _ = try await store.register([registration("u2", 6), registration("u1", 7, app: "customer")], maxActive: 3, now: 6)
            for n in 8...11 {
                _ = try await store.registerLiveActivity(Self.activity("u1", n, "act-\(n)"), maxActive: 3, now: Int64(n))
            }
            #expect(try await store.devices(userID: "u1").count == 4, "three of staff, one of customer")
            #expect(try await store.devices(userID: "u2").count == 1)
            #expect(try await store.liveActivityTokens(userID: "u1").map(\.token) == [token(11), token(10), token(9)])
            // A replaced token registered again is the newest; the oldest then goes.
            _ = try await store.register([registration("u1", 1)], maxActive: 3, now: 20)
            #expect(try await store.devices(userID: "u1").filter { $0.appType == "staff" }.map(\.id) == [1, 5, 4])
            // A bulk list over the cap keeps its newest.
            _ = try await store.register((30...34).map { registration("u3", $0) }, maxActive: 2, now: 30)
            #expect(try await store.devices(userID: "u3").count == 2)
        }
    }

    @Test(arguments: StoreKind.allCases) func aListOfRegistrationsIsStoredWholeOrNotAtAll(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let failing = token(1500)
            let engine: DiskFullTrigger.Engine = kind == .sqlite ? .sqlite : .postgres
            for sql in DiskFullTrigger.create(engine, table: "devices", column: "token", value: failing) {
                try await store.execute(sql)
            }
            try await register(store, "old", 2000)
            let list = (1000..<2000).map { registration("u\($0)", $0) }
            await #expect(throws: StoreError.self) { try await store.register(list, maxActive: 20, now: 5) }
            #expect(try await store.scalar("SELECT count(*) FROM devices") == 1, "none of the thousand")

            // A refused entry in the middle: its index, and nothing stored either.
            try await store.registerLiveActivity(Self.activity("x", 7, nil), now: 6)
            let refused = (1...10).map { registration("v\($0)", $0) }
            #expect(try await store.register(refused, maxActive: 20, now: 7) == RegistrationRefusal(.otherKind, index: 6))
            #expect(try await store.scalar("SELECT count(*) FROM devices") == 2)

            let fine = list.filter { $0.token != failing }
            #expect(try await store.register(fine, maxActive: 20, now: 8) == nil)
            #expect(try await store.scalar("SELECT count(*) FROM devices") == 2 + 999)
        }
    }

    @Test(arguments: StoreKind.allCases) func tokensDeactivatedLongAgoArePruned(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            try await register(store, "u1", 1)
            try await register(store, "u1", 2)
            try await register(store, "u1", 3)
            try await store.registerLiveActivity(Self.activity("u1", 4, "act-X"), now: 1)
            try await store.registerLiveActivity(Self.activity("u1", 5, "act-Y"), now: 1)
            try await store.registerLiveActivity(Self.activity("u1", 6, "act-Y"), now: 1)
            try await register(store, "u1", 7)
            #expect(try await store.unregister(userID: "u1", token: token(2), now: 10))
            #expect(try await store.unregister(userID: "u1", token: token(3), now: 100))
            #expect(try await store.unregisterLiveActivity(userID: "u1", token: token(4), now: 10))
            #expect(try await store.unregisterLiveActivity(userID: "u1", token: token(5), now: 10))

            #expect(try await store.pruneDevices(inactiveBefore: 50, limit: 1) == 1, "a batch at a time")
            #expect(try await store.pruneDevices(inactiveBefore: 50, limit: 10) == 2)
            #expect(try await store.pruneDevices(inactiveBefore: 50, limit: 10) == 0)
            for (n, left) in [(1, 1), (2, 0), (3, 1), (4, 0), (5, 0), (6, 1), (7, 1)] {
                #expect(try await Self.rows(store, token: n) == Int64(left), "token \(n)")
            }
            #expect(try await store.scalar("SELECT count(*) FROM live_activity_tokens") == 1)
            // act-X lost its last token and its owner; act-Y keeps both.
            #expect(try await store.scalar("SELECT count(*) FROM live_activities WHERE activity_id = 'act-X'") == 0)
            #expect(try await store.registerLiveActivity(Self.activity("u2", 8, "act-Y"), now: 200)
                    == RegistrationRefusal(.activityOfAnotherUser))
            #expect(try await store.registerLiveActivity(Self.activity("u2", 8, "act-X"), now: 200) == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aChannelIsReadOnlyByTheAudienceTheBackendNamed(_ kind: StoreKind) async throws {
        try await withStore(kind) { store in
            let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
            _ = try await store.addChannel(ChannelRow(key: key, channelID: "AAAA", storagePolicy: 1, createdAt: 1), audience: nil)
            #expect(try await store.channel(key)?.channelID == "AAAA", "the backend reads it")
            #expect(try await store.channel(key, visibleTo: "u1", companyID: "c1") == nil, "no audience: no app user")

            #expect(try await store.setChannelAudience(key, ChannelAudience(userIDs: ["u1", "u2", "u1"], companyID: "c1")))
            for (user, company, sees) in [("u1", nil, true), ("u2", "c9", true), ("u3", "c1", true), ("u4", "c2", false),
                                          ("u5", nil, false)] as [(String, String?, Bool)] {
                #expect((try await store.channel(key, visibleTo: user, companyID: company) != nil) == sees, "\(user)")
            }
            // Created again: without an audience it keeps its own, with one it takes that one.
            _ = try await store.addChannel(ChannelRow(key: key, channelID: "BBBB", storagePolicy: 1, createdAt: 2), audience: nil)
            #expect(try await store.channel(key, visibleTo: "u2", companyID: nil)?.channelID == "AAAA")
            _ = try await store.addChannel(ChannelRow(key: key, channelID: "BBBB", storagePolicy: 1, createdAt: 2),
                                           audience: ChannelAudience(isPublic: true))
            #expect(try await store.channel(key, visibleTo: "u5", companyID: nil)?.channelID == "AAAA")
            #expect(try await store.scalar("SELECT count(*) FROM channel_users") == 0)

            #expect(try await store.setChannelAudience(key, ChannelAudience(userIDs: ["u1"])))
            #expect(try await store.channel(key, visibleTo: "u5", companyID: nil) == nil, "no longer public")
            let elsewhere = ChannelKey(appType: "staff", environment: "sandbox", entityType: "match", entityID: "m1")
            #expect(try await store.channel(elsewhere, visibleTo: "u1", companyID: nil) == nil)
            #expect(try await !store.setChannelAudience(elsewhere, ChannelAudience(isPublic: true)))
            #expect(try await store.removeChannel(key, channelID: "AAAA"))
            #expect(try await store.scalar("SELECT count(*) FROM channel_users") == 0, "its audience went with it")
        }
    }
}

/// The schema step that brings owners and audiences to a database made before them:
/// nothing is lost, and what was open before is closed now.
@Suite(.postgresCluster) struct OwnershipUpgradeTests {
    /// A Live Activity taken over before owners were kept (bob's token under alice's
    /// activity), a channel, and a token soft-deleted without a time.
    static let before = [
        """
        INSERT INTO devices (id, user_id, app_type, token, platform, environment, registered_at, created_at, updated_at)
            VALUES (1, 'alice', 'staff', 't1', 'liveactivity', 'production', 1, 1, 1),
                   (2, 'bob', 'staff', 't2', 'liveactivity', 'production', 2, 2, 2),
                   (3, 'carol', 'staff', 't3', 'ios', 'production', 3, 3, 3)
        """,
        "UPDATE devices SET is_active = '0' WHERE id = 3",
        """
        INSERT INTO live_activity_tokens (device_id, kind, activity_id, attributes_type)
            VALUES (1, 'update', 'act-A', 'Attrs'), (2, 'update', 'act-A', 'Attrs')
        """,
        """
        INSERT INTO channels (app_type, environment, entity_type, entity_id, channel_id, storage_policy, created_at)
            VALUES ('staff', 'production', 'match', 'm1', 'AAAA', 1, 1)
        """,
    ]

    static func check(_ store: some TestStore, devices: Int64) async throws {
        #expect(try await store.liveActivityTokens(appType: "staff", .activity("act-A")).map(\.userID) == ["alice"])
        #expect(try await store.liveActivityTokens(userID: "bob").map(\.token) == ["t2"], "kept, reaching no one")
        #expect(try await store.registerLiveActivity(OwnershipTests.activity("bob", 9, "act-A"), now: 10)
                == RegistrationRefusal(.activityOfAnotherUser))
        let key = ChannelKey(appType: "staff", environment: "production", entityType: "match", entityID: "m1")
        #expect(try await store.channel(key)?.channelID == "AAAA")
        #expect(try await store.channel(key, visibleTo: "alice", companyID: nil) == nil)
        #expect(try await store.scalar("SELECT count(*) FROM devices") == devices)
        #expect(try await store.pruneDevices(inactiveBefore: 4, limit: 10) == 1, "its last update dates the soft delete")
    }

    @Test(arguments: StoreKind.allCases) func step11KeepsAStep10Database(_ kind: StoreKind) async throws {
        try await withStore(kind, migratedThrough: 10) { store in
            // SQLite never prunes the newest row (see `pruneDevices`): one after carol's.
            let dave = """
                INSERT INTO devices (id, user_id, app_type, token, platform, environment, registered_at, created_at, updated_at)
                    VALUES (4, 'dave', 'staff', 't4', 'ios', 'production', 4, 4, 4)
                """
            // Ids written by hand: PostgreSQL's sequence must go on after them.
            let sequence = kind == .postgres ? ["SELECT setval('devices_id_seq', 4)"] : []
            for statement in Self.before + [dave] + sequence { try await store.execute(statement) }
            try await store.migrate()
            #expect(try await store.schemaVersion() == Int64(Schema.steps.count))
            try await Self.check(store, devices: 4)
        }
    }
}
