import Foundation
import Synchronization
import TestSupport
import Testing
@testable import APNs

/// APNS-PROTOCOL.md, "Provider JWT": one token per connection, refreshed after about
/// 50 minutes; on ExpiredProviderToken refresh once (a generation counter stops a
/// burst of replies from causing a burst of refreshes).
@Suite struct ProviderTokenTests {
    let credentials = try! Credentials(key: SigningKey(contentsOf: TestPKI.shared.keyPath),
                                       keyID: TestPKI.shared.keyID, teamID: TestPKI.shared.teamID)

    @Test func signsOnceAndReusesUntilFiftyMinutes() throws {
        let token = ProviderToken(credentials: credentials)
        let t0: Int64 = 1_800_000_000
        let first = try token.current(now: t0)
        #expect(try token.current(now: t0 + 49 * 60).jwt == first.jwt)
        let second = try token.current(now: t0 + 50 * 60)
        #expect(second.jwt != first.jwt && second.generation == first.generation + 1)
        #expect(token.signatureCount == 2)
    }

    @Test func aBurstOfExpiredAnswersRefreshesOnce() throws {
        let token = ProviderToken(credentials: credentials)
        let first = try token.current(now: 1_800_000_000)
        for _ in 0..<100 { _ = try token.expired(generation: first.generation, now: 1_800_000_100) }
        #expect(token.signatureCount == 2)
        #expect(try token.current(now: 1_800_000_100).generation == first.generation + 1)
    }

    @Test func claimsCarryKeyTeamAndIntegerIat() throws {
        let jwt = try ProviderToken(credentials: credentials).current(now: 1_800_000_000).jwt
        let parts = jwt.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        func decode(_ s: String) -> String {
            var b = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while b.count % 4 != 0 { b += "=" }
            return String(decoding: Data(base64Encoded: b)!, as: UTF8.self)
        }
        #expect(decode(parts[0]) == #"{"alg":"ES256","kid":"\#(TestPKI.shared.keyID)"}"#)
        #expect(decode(parts[1]) == #"{"iss":"\#(TestPKI.shared.teamID)","iat":1800000000}"#)
    }

    @Test func credentialsRefuseIDsThatAreNotTenCharacters() throws {
        let key = try SigningKey(contentsOf: TestPKI.shared.keyPath)
        #expect(throws: Credentials.Error.badKeyID("SHORT")) { try Credentials(key: key, keyID: "SHORT", teamID: "ABCDEFGHIJ") }
        #expect(throws: Credentials.Error.badTeamID("ABCDEFGHIJK")) {
            try Credentials(key: key, keyID: "ABCDEFGHIJ", teamID: "ABCDEFGHIJK")
        }
    }
}
