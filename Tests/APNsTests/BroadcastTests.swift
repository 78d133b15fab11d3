import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// `BroadcastClient` against the mock over real TLS: channel management on its
/// own connection, broadcasts through the engine (both transports), every reason
/// APNS-PROTOCOL.md's "Broadcast push (iOS 18)" lists, and one result per call.
@Suite struct BroadcastTests {
    static let update = try! Payload(json: #"{"aps":{"timestamp":1790000600,"event":"update","content-state":{"score":"1-0"}}}"#)

    static func broadcasts(_ mock: MockServer, transport: Transport = .nghttp2) throws -> (APNsClient, BroadcastClient) {
        // The management calls make one attempt each (a create is not idempotent), so
        // their connect gets the room a loaded CI machine needs for a TLS handshake.
        let client = try Harness.client(port: mock.port, transport: transport, connectTimeout: .seconds(10))
        return (client, try BroadcastClient(client: client, bundleID: TestPKI.shared.topic))
    }

    /// "POST /1/apps/<bundle>/channels ... returns 201 and the new id in the
    /// apns-channel-id header"; read, list, delete (204).
    @Test func channelsAreCreatedReadListedAndDeleted() async throws {
        let mock = try Harness.mock()
        let (client, b) = try Self.broadcasts(mock)
        #expect(b.managementEndpoint == Endpoint(host: "127.0.0.1", port: Int(mock.port)))

        let created = await b.createChannel(storagePolicy: .mostRecentMessageStored)
        #expect(created.status == 201 && created.isSuccess && created.error == nil)
        let id = try #require(created.channelID)
        #expect(isChannelID(id))
        #expect(created.requestID != nil)

        let read = await b.readChannel(id)
        #expect(read.status == 200 && read.storagePolicy == .mostRecentMessageStored)
        let list = await b.listChannels()
        #expect(list.status == 200 && list.channelIDs == [id])
        let deleted = await b.deleteChannel(id)
        #expect(deleted.status == 204 && deleted.isSuccess)
        let again = await b.readChannel(id)
        #expect(again.status == 400 && again.reason == .channelNotRegistered && !again.isSuccess)
        #expect(await b.listChannels().channelIDs == [])
        await client.shutdown()
        #expect(mock.statistics().channelsCreated == 1 && mock.statistics().channelsDeleted == 1)
    }

    /// "POST /4/broadcasts/apps/<bundle> with headers apns-channel-id, apns-push-type:
    /// liveactivity, apns-priority and apns-expiration"; "the answer carries
    /// apns-request-id and apns-unique-id". Through the engine, on both transports.
    @Test(arguments: Transport.allCases)
    func aBroadcastGoesThroughTheEngineWithItsHeaders(transport: Transport) async throws {
        let mock = try Harness.mock { $0.recordRequests = true }
        let (client, b) = try Self.broadcasts(mock, transport: transport)
        let id = try #require(await b.createChannel(storagePolicy: .noMessageStored).channelID)
        let note = try BroadcastNotification(priority: .immediate, payload: Self.update)
        let result = await b.send(note, on: id)
        await client.shutdown()

        #expect(result.status == 200 && result.reason == nil && result.attempts == 1)
        #expect(result.uniqueID != nil, "apns-unique-id")
        let request = try #require(mock.recordedRequests().first { $0.path.hasPrefix("/4/") })
        #expect(request.method == "POST")
        #expect(request.path == "/4/broadcasts/apps/\(TestPKI.shared.topic)")
        #expect(request.header("apns-channel-id") == id)
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-priority") == "10")
        #expect(request.header("apns-expiration") == "0")
        #expect(request.header("apns-request-id") == result.apnsID, "our request id, echoed")
        #expect(request.header("apns-topic") == nil, "the bundle id is in the path")
        #expect(request.header("apns-id") == nil)
        #expect(request.body == Self.update.bytes)
    }

    /// Each reason APNs gives a broadcast or a management call, as one result each.
    @Test func everyRefusalIsOneResultWithItsReason() async throws {
        let mock = try Harness.mock { $0.channelLimit = 2 }
        let (client, b) = try Self.broadcasts(mock)
        let noStorage = try #require(await b.createChannel(storagePolicy: .noMessageStored).channelID)
        #expect(await b.createChannel(storagePolicy: .mostRecentMessageStored).status == 201)
        let third = await b.createChannel(storagePolicy: .noMessageStored)
        #expect(third.status == 400 && third.reason == .cannotCreateChannelConfig && third.channelID == nil, "\(third)")

        let unknown = await b.send(try BroadcastNotification(payload: Self.update), on: "c29tZUNoYW5uZWw=")
        #expect(unknown.status == 400 && unknown.reason == .channelNotRegistered && unknown.attempts == 1)
        let stored = try BroadcastNotification(expiration: .at(unixSeconds: 1_900_000_000), payload: Self.update)
        let expiring = await b.send(stored, on: noStorage)
        #expect(expiring.status == 400 && expiring.reason == .badExpirationDate, "expiration must be 0 with no storage")

        // A malformed id never leaves: a local result, nothing on the wire.
        let streams = mock.statistics().streams
        let bad = await b.send(try BroadcastNotification(payload: Self.update), on: "not a channel")
        #expect(bad.status == 0 && bad.reason == .badChannelId && bad.attempts == 0 && bad.error != nil)
        let badRead = await b.readChannel("%%")
        #expect(badRead.status == 0 && badRead.reason == .badChannelId)
        #expect(mock.statistics().streams == streams)
        await client.shutdown()

        let disabled = try Harness.mock { $0.broadcastEnabled = false }
        let (client2, b2) = try Self.broadcasts(disabled)
        let refused = await b2.createChannel(storagePolicy: .noMessageStored)
        #expect(refused.status == 400 && refused.reason == .featureNotEnabled, "\(refused)")
        let listed = await b2.listChannels()
        #expect(listed.reason == .featureNotEnabled && listed.channelIDs == nil)
        await client2.shutdown()
    }

    /// "The payload may be up to 5,120 bytes": 5,120 is sent, 5,121 refused before sending.
    @Test func broadcastPayloadsGoUpTo5120Bytes() async throws {
        func payload(_ size: Int) throws -> Payload {
            let head = #"{"aps":{"timestamp":1,"event":"update","content-state":{"pad":""#, tail = #""}}}"#
            return try Payload(json: head + String(repeating: "x", count: size - head.utf8.count - tail.utf8.count) + tail)
        }
        #expect(throws: BroadcastNotification.Error.payloadTooLarge(size: 5121)) {
            try BroadcastNotification(payload: payload(5121))
        }
        #expect(throws: BroadcastNotification.Error.cannotStart) {
            try BroadcastNotification(payload: Payload(json: #"{"aps":{"timestamp":1,"event":"start","content-state":{},"attributes-type":"A","attributes":{},"alert":{"title":"t"}}}"#))
        }
        let mock = try Harness.mock()
        let (client, b) = try Self.broadcasts(mock)
        let id = try #require(await b.createChannel(storagePolicy: .noMessageStored).channelID)
        let result = await b.send(try BroadcastNotification(payload: payload(5120)), on: id)
        await client.shutdown()
        #expect(result.status == 200)
    }

    /// Provider-token rules: management calls are signed with the engine's token
    /// and, on 403 ExpiredProviderToken, sign a new one once and ask again.
    @Test func anExpiredProviderTokenIsRenewedOnce() async throws {
        let mock = try Harness.mock { $0.expireFirstProviderTokenAfter = 0 }
        let (client, b) = try Self.broadcasts(mock)
        let created = await b.createChannel(storagePolicy: .noMessageStored)
        let signatures = client.statistics.jwtSignatures
        await client.shutdown()
        #expect(created.status == 201)
        #expect(signatures == 2, "the first token and its one renewal")
        #expect(mock.statistics().byReason["ExpiredProviderToken"] == 1)
    }

    /// No answer at all is still one result, with status 0 and why.
    @Test func anUnreachableManagementHostIsOneResult() async throws {
        let mock = try Harness.mock()
        let client = try Harness.client(mock, transport: .nghttp2)
        let closed = ClosedPort()
        defer { withExtendedLifetime(closed) {} }
        let b = try BroadcastClient(client: client, bundleID: TestPKI.shared.topic,
                                    managementEndpoint: Endpoint(host: "127.0.0.1", port: Int(closed.port)))
        let result = await b.listChannels()
        await client.shutdown()
        #expect(result.status == 0 && !result.isSuccess)
        #expect(result.error?.contains("127.0.0.1:\(closed.port)") == true)
    }
}
