import APNsMock
import Foundation
import Testing
import TestSupport

/// "Provider JWT (ES256)" of APNS-PROTOCOL.md: tokens signed with the openssl CLI.
@Suite struct ProviderTokenTests {
    let pki = Fixture.pki
    let now = Int(Date().timeIntervalSince1970)

    func answer(_ jwt: String?, mock: MockServer) -> Answer {
        curl(mock.port, Request().with("authorization", jwt.map { "bearer \($0)" }))
    }

    @Test("A missing authorization header is 403 MissingProviderToken")
    func missing() throws {
        let mock = try Fixture.mock()
        let a = answer(nil, mock: mock)
        #expect(a.status == 403)
        #expect(a.reason == "MissingProviderToken")
    }

    @Test("A key the mock does not know (unknown kid) is 403 InvalidProviderToken")
    func unknownKey() throws {
        let mock = try Fixture.mock()
        let a = answer(Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.otherKeyID), mock: mock)
        #expect(a.status == 403)
        #expect(a.reason == "InvalidProviderToken")
    }

    @Test("A known kid signed by a different key (bad signature) is 403 InvalidProviderToken")
    func badSignature() throws {
        let mock = try Fixture.mock()
        let a = answer(Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.keyID), mock: mock)
        #expect(a.status == 403)
        #expect(a.reason == "InvalidProviderToken")
        #expect(mock.statistics().jwtVerifications == 1)
    }

    @Test("A tampered token is 403 InvalidProviderToken")
    func tampered() throws {
        let mock = try Fixture.mock()
        var parts = Fixture.goodJWT.split(separator: ".").map(String.init)
        parts[1] = Fixture.base64url(Data(#"{"iss":"\#(pki.teamID)","iat":\#(now + 1)}"#.utf8))
        #expect(answer(parts.joined(separator: "."), mock: mock).reason == "InvalidProviderToken")
        #expect(answer("not-a-jwt", mock: mock).reason == "InvalidProviderToken")
    }

    @Test("An unknown team (iss) is 403 InvalidProviderToken")
    func wrongTeam() throws {
        let mock = try Fixture.mock()
        #expect(answer(Fixture.jwt(teamID: "OTHERTEAM9"), mock: mock).reason == "InvalidProviderToken")
    }

    @Test("\"Rejected when iat is older than 1 hour (403 ExpiredProviderToken)\"")
    func expired() throws {
        let mock = try Fixture.mock()
        let a = answer(Fixture.jwt(iat: now - 3700), mock: mock)
        #expect(a.status == 403)
        #expect(a.reason == "ExpiredProviderToken")
        // 59 minutes old is still good.
        #expect(answer(Fixture.jwt(iat: now - 3540), mock: mock).status == 200)
    }

    @Test("An iat in the future beyond small skew is 403 InvalidProviderToken")
    func future() throws {
        let mock = try Fixture.mock()
        #expect(answer(Fixture.jwt(iat: now + 600), mock: mock).reason == "InvalidProviderToken")
        #expect(answer(Fixture.jwt(iat: now + 10), mock: mock).status == 200)
    }

    @Test("\"Changing the token on a connection more often than every 20 minutes gives 429 TooManyProviderTokenUpdates\"")
    func tooManyUpdates() throws {
        let mock = try Fixture.mock()
        let first = Request()
        let second = Request().with("authorization", "bearer \(Fixture.jwt(iat: now - 60))")
        let (answers, _) = curl(mock.port, [first, second, first])
        #expect(answers.map(\.status) == [200, 429, 200])
        #expect(answers[1].reason == "TooManyProviderTokenUpdates")
        #expect(mock.statistics().connectionsAccepted == 1)
    }

    @Test("After the update interval a connection may change its token")
    func updateAfterInterval() throws {
        let mock = try Fixture.mock { $0.tokenUpdateInterval = .seconds(1) }
        let second = Request().with("authorization", "bearer \(Fixture.jwt(iat: now - 60))")
        // curl --rate spaces the two requests 2 s apart on the same connection.
        let (answers, _) = curl(mock.port, [Request(), second], extra: ["--rate", "30/m"])
        #expect(answers.map(\.status) == [200, 200])
        #expect(mock.statistics().connectionsAccepted == 1)
    }

    /// Two teams, each with its own key (an APNs key belongs to one team).
    static func twoTeams() throws -> MockServer {
        try Fixture.mock {
            $0.teamIDs = [Fixture.pki.teamID, "TEAMTWO002"]
            $0.authKeys[Fixture.pki.otherKeyID] = Fixture.pki.otherKeyPath
            $0.keyTeams = [Fixture.pki.keyID: Fixture.pki.teamID, Fixture.pki.otherKeyID: "TEAMTWO002"]
        }
    }

    @Test("\"One team per connection\": a second team's token on the same connection is refused")
    func oneTeamPerConnection() throws {
        let mock = try Self.twoTeams()
        let other = Request().with("authorization",
                                   "bearer \(Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.otherKeyID, teamID: "TEAMTWO002"))")
        let (answers, _) = curl(mock.port, [Request(), other])
        #expect(answers.map(\.status) == [200, 403])
        #expect(answers[1].reason == "InvalidProviderToken")
        #expect(curl(mock.port, other).status == 200)
    }

    @Test("Verified tokens are cached: one verification for many requests and connections")
    func cached() throws {
        let mock = try Fixture.mock()
        _ = curl(mock.port, Array(repeating: Request(), count: 5))
        _ = curl(mock.port, Request())
        let s = mock.statistics()
        #expect(s.byStatus[200] == 6)
        #expect(s.distinctJWTs == 1)
        #expect(s.jwtVerifications == 1)
    }

    @Test("A key signs only for its own team: team A's key with iss = team B is 403 InvalidProviderToken")
    func keyBoundToItsTeam() throws {
        let mock = try Self.twoTeams()
        defer { mock.stop() }
        // Each key for its own team: accepted (on connections of their own).
        #expect(curl(mock.port).status == 200)
        let own = Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.otherKeyID, teamID: "TEAMTWO002")
        #expect(curl(mock.port, Request().with("authorization", "bearer \(own)")).status == 200)
        // A good signature by a configured key, for the other configured team: refused.
        let crossed = [Fixture.jwt(teamID: "TEAMTWO002"),
                       Fixture.jwt(keyPath: pki.otherKeyPath, keyID: pki.otherKeyID, teamID: pki.teamID)]
        for jwt in crossed {
            let a = curl(mock.port, Request().with("authorization", "bearer \(jwt)"))
            #expect(a.status == 403)
            #expect(a.reason == "InvalidProviderToken")
        }
    }

    @Test("A key's team must be configured, and with several teams it must be named")
    func keyTeamConfiguration() throws {
        #expect(throws: MockError.self) {
            _ = try Fixture.mock { $0.keyTeams = [Fixture.pki.keyID: "NOSUCHTEAM"] }
        }
        #expect(throws: MockError.self) {
            _ = try Fixture.mock { $0.teamIDs = [Fixture.pki.teamID, "TEAMTWO002"] }
        }
    }

    @Test("The authorization length limit at its boundary: 1023 bytes are read, 1024 are too long")
    func authorizationLengthBoundary() throws {
        let mock = try Fixture.mock()
        defer { mock.stop() }
        // Not JWTs either way (403 InvalidProviderToken); what differs is whether the
        // value was taken as a token at all: distinctJWTs counts the ones looked at.
        let fits = "bearer " + String(repeating: "A", count: 1023 - 7)
        let tooLong = "bearer " + String(repeating: "B", count: 1024 - 7)
        #expect(curl(mock.port, Request().with("authorization", fits)).reason == "InvalidProviderToken")
        #expect(mock.statistics().distinctJWTs == 1)
        #expect(curl(mock.port, Request().with("authorization", tooLong)).reason == "InvalidProviderToken")
        #expect(mock.statistics().distinctJWTs == 1, "a 1024-byte value (cut to 1023 when captured) was judged")
    }
}
