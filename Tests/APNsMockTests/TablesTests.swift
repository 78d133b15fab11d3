import APNsMock
import Foundation
import Testing
import TestSupport

/// Per-token behaviour (unregistered, scripted, forced, attempts) and recording.
@Suite struct TablesTests {
    @Test("\"410 adds timestamp\": an unregistered token is 410 Unregistered with its timestamp")
    func unregistered() throws {
        let mock = try Fixture.mock { $0.unregistered = [Fixture.otherToken: 1_700_000_000_123] }
        var r = Request()
        r.path = "/3/device/\(Fixture.otherToken)"
        let a = curl(mock.port, r)
        #expect(a.status == 410)
        #expect(a.reason == "Unregistered")
        #expect((a.json?["timestamp"] as? NSNumber)?.int64Value == 1_700_000_000_123)
        #expect(curl(mock.port).status == 200)
    }

    @Test("Scripted answers for the first attempts, then normal handling; attempts are counted")
    func scripted() throws {
        let mock = try Fixture.mock {
            $0.scripted = [Fixture.token: [.serviceUnavailable, .tooManyRequests]]
            $0.forced = [Fixture.otherToken: .error(400, "BadDeviceToken")]
        }
        let (answers, _) = curl(mock.port, [Request(), Request(), Request()])
        #expect(answers.map(\.status) == [503, 429, 200])
        #expect(answers.map(\.reason) == ["ServiceUnavailable", "TooManyRequests", nil])
        #expect(mock.attempts(for: Fixture.token) == 3)

        var other = Request()
        other.path = "/3/device/\(Fixture.otherToken)"
        let forced = curl(mock.port, [other, other]).answers
        #expect(forced.map(\.status) == [400, 400])
        #expect(forced.map(\.reason) == ["BadDeviceToken", "BadDeviceToken"])
        #expect(mock.attempts(for: Fixture.otherToken) == 2)
        #expect(mock.attempts(for: String(repeating: "ef", count: 32)) == 0)
    }

    @Test("Thousands of tokens and the longest: the table grows, and each keeps its own mark and count")
    func manyTokens() async throws {
        let tokens = deterministicTokens(5_000, seed: 3)
        let longest = String(repeating: "0123456789abcdef", count: 12) + "01234567"   // 200 digits
        var marks = [longest: Int64(42)]
        for (i, token) in tokens.enumerated() { marks[token] = 1_700_000_000_000 + Int64(i) }
        let mock = try Fixture.mock { $0.unregistered = marks }
        let asked = [tokens[0], tokens[2_500], tokens[4_999], longest, longest]
        let answers = await offPool {
            curl(mock.port, asked.map { token in var r = Request(); r.path = "/3/device/\(token)"; return r }).answers
        }
        #expect(answers.map(\.status) == [410, 410, 410, 410, 410])
        #expect(answers.map { ($0.json?["timestamp"] as? NSNumber)?.int64Value } ==
                [1_700_000_000_000, 1_700_000_002_500, 1_700_000_004_999, 42, 42])
        #expect(mock.attempts(for: longest) == 2)
        #expect(tokens.filter { mock.attempts(for: $0) == 1 } == [tokens[0], tokens[2_500], tokens[4_999]])
        #expect(mock.attempts(for: Fixture.token) == 0)
    }

    @Test("Counting only the known tokens: scripts and marks still count, other tokens are not kept")
    func countsKnownTokensOnly() async throws {
        let mock = try Fixture.mock {
            $0.countsEveryToken = false
            $0.scripted = [Fixture.token: [.serviceUnavailable]]
            $0.unregistered = [Fixture.otherToken: 7]
        }
        let unknown = String(repeating: "ef", count: 32)
        var other = Request(), third = Request()
        other.path = "/3/device/\(Fixture.otherToken)"
        third.path = "/3/device/\(unknown)"
        let requests = [Request(), Request(), other, third, third]
        let answers = await offPool { curl(mock.port, requests).answers }
        #expect(answers.map(\.status) == [503, 200, 410, 200, 200])
        #expect(mock.attempts(for: Fixture.token) == 2)
        #expect(mock.attempts(for: Fixture.otherToken) == 1)
        #expect(mock.attempts(for: unknown) == 0)
    }

    @Test("A script can pass an attempt through to normal judging")
    func scriptedPass() throws {
        let mock = try Fixture.mock { $0.scripted = [Fixture.token: [.pass, .internalServerError]] }
        let (answers, _) = curl(mock.port, [Request(), Request(), Request()])
        #expect(answers.map(\.status) == [200, 500, 200])
    }

    @Test("Recording keeps method, path, headers in order, body and connection id")
    func recording() throws {
        let mock = try Fixture.mock { $0.recordRequests = true }
        let id = "0f5b7e2a-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
        let request = Request().with("apns-id", id).with("apns-collapse-id", "c1")
        let answer = curl(mock.port, request)
        #expect(answer.status == 200)
        #expect(answer.headers["apns-id"] == id)       // "APNs ... echoes it back"
        let records = mock.recordedRequests()
        #expect(records.count == 1)
        let r = try #require(records.first)
        #expect(r.method == "POST")
        #expect(r.path == "/3/device/\(Fixture.token)")
        #expect(r.token == Fixture.token)
        #expect(r.connectionID == 1)
        #expect(r.body == [UInt8](Fixture.payload))
        #expect(r.header("apns-id") == id)
        #expect(r.header("apns-topic") == Fixture.pki.topic)
        let names = r.headers.map(\.0).filter { $0.hasPrefix("apns-") }
        #expect(names == ["apns-topic", "apns-push-type", "apns-id", "apns-collapse-id"])
    }

    @Test("Recording stops at its cap; off by default")
    func recordingCap() throws {
        let capped = try Fixture.mock { $0.recordRequests = true; $0.recordCap = 2 }
        _ = curl(capped.port, Array(repeating: Request(), count: 3))
        #expect(capped.recordedRequests().count == 2)
        let off = try Fixture.mock()
        _ = curl(off.port)
        #expect(off.recordedRequests().isEmpty)
    }
}
