import APNsMock
import Foundation
import TestSupport
import Testing
@testable import APNs

/// Two apps with their own keys and teams in one `APNsClientPool`: each key on
/// connections of its own, never mixed. The mock binds a connection to the team
/// and key of its first push and restricts each key to its app's bundle id, so a
/// mix-up would be refused; its recording shows which key each connection carried.
@Suite struct ClientPoolTests {
    static let otherTeam = "TEAMTWO002"
    static let otherTopic = "com.example.other"

    @Test func twoAppsWithTheirOwnKeysNeverShareAConnection() async throws {
        let pki = TestPKI.shared
        let mock = try Harness.mock {
            $0.teamIDs = [pki.teamID, Self.otherTeam]
            $0.authKeys[pki.otherKeyID] = pki.otherKeyPath
            $0.keyTeams = [pki.keyID: pki.teamID, pki.otherKeyID: Self.otherTeam]
            $0.topics = [pki.topic, Self.otherTopic]
            $0.keyTopics = [pki.keyID: [pki.topic], pki.otherKeyID: [Self.otherTopic]]
            $0.recordRequests = true
        }
        let appA = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        let appB = try Credentials(key: SigningKey(contentsOf: pki.otherKeyPath), keyID: pki.otherKeyID,
                                   teamID: Self.otherTeam)
        let pool = APNsClientPool(configuration: .init(
            credentials: appA, environment: .custom(host: "127.0.0.1", port: Int(mock.port)),
            caFile: pki.caFile, retry: Harness.retry))
        let noteA = try Notification(topic: pki.topic, payload: Harness.payload)
        let noteB = try Notification(topic: Self.otherTopic, payload: Harness.payload)

        // Interleaved, concurrently: both apps' sends are in flight together.
        let tokens = Harness.tokens(40)
        let results = await withTaskGroup(of: DeliveryResult?.self) { group in
            for (i, token) in tokens.enumerated() {
                group.addTask {
                    try? await pool.send(i % 2 == 0 ? noteA : noteB, to: token, credentials: i % 2 == 0 ? appA : appB)
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        await pool.shutdown()

        #expect(results.count == tokens.count)
        #expect(results.allSatisfy { $0?.status == 200 }, "\(results.filter { $0?.status != 200 }.prefix(2))")
        #expect(pool.all.count == 2)
        let recorded = mock.recordedRequests()
        #expect(recorded.count == tokens.count, "nothing refused, nothing sent twice")
        var keysByConnection: [UInt64: Set<String>] = [:]
        for request in recorded {
            keysByConnection[request.connectionID, default: []].insert(try Self.keyID(of: request))
        }
        #expect(keysByConnection.values.allSatisfy { $0.count == 1 }, "\(keysByConnection)")
        #expect(Set(keysByConnection.values.flatMap { $0 }) == [pki.keyID, pki.otherKeyID])
    }

    @Test func aShutPoolMakesNoClient() async throws {
        let pki = TestPKI.shared
        let creds = try Credentials(key: SigningKey(contentsOf: pki.keyPath), keyID: pki.keyID, teamID: pki.teamID)
        let pool = APNsClientPool(configuration: .init(credentials: creds, environment: .custom(host: "127.0.0.1", port: 1)))
        await pool.shutdown()
        #expect(throws: APNsError.shutDown) { _ = try pool.client(for: creds) }
    }

    /// The "kid" of a recorded request's provider token (the JWT header, base64url).
    static func keyID(of request: RecordedRequest) throws -> String {
        let jwt = try #require(request.header("authorization")?.dropFirst("bearer ".count))
        var header = String(try #require(jwt.split(separator: ".").first))
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while header.count % 4 != 0 { header += "=" }
        let json = try #require(Data(base64Encoded: header))
        let object = try #require(try JSONSerialization.jsonObject(with: json) as? [String: Any])
        return try #require(object["kid"] as? String)
    }
}
