import APNsMock
import Foundation
import Testing
import TestSupport

/// What a set-up check and the header-size benchmark read from the mock: its
/// clock (error answers' `date` header, and the clock provider tokens are judged
/// by), the all-zero token it refuses only after the credentials, and the HPACK
/// size of request headers.
@Suite struct ClockAndHeaderBytesTests {
    static func seconds(_ httpDate: String?) -> Int64? {
        guard let httpDate else { return nil }
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.date(from: httpDate).map { Int64($0.timeIntervalSince1970) }
    }

    @Test("A mock clock 2 h ahead finds a fresh token 2 h old, and its error answers' date says so")
    func clockOffset() throws {
        let mock = try Fixture.mock { $0.clockOffset = .seconds(7200) }
        let before = Int64(Date().timeIntervalSince1970)
        let a = curl(mock.port)
        #expect(a.status == 403 && a.reason == "ExpiredProviderToken", "\(a)")
        let date = try #require(Self.seconds(a.headers["date"]), "\(a.headers)")
        #expect(date >= before + 7200 && date <= Int64(Date().timeIntervalSince1970) + 7200)
    }

    @Test("Error answers carry the date; a 200 carries none")
    func dateOnErrorsOnly() throws {
        let mock = try Fixture.mock()
        let ok = curl(mock.port)
        #expect(ok.status == 200 && ok.headers["date"] == nil, "\(ok)")
        let refused = curl(mock.port, Request().with("apns-topic", "com.example.unknown"))
        #expect(refused.status == 400)
        let date = try #require(Self.seconds(refused.headers["date"]), "\(refused.headers)")
        #expect(abs(date - Int64(Date().timeIntervalSince1970)) <= 5)
    }

    @Test("The all-zero token is refused (BadDeviceToken) only once the credentials passed")
    func allZeroToken() throws {
        let mock = try Fixture.mock()
        let zero = Request(path: "/3/device/" + String(repeating: "0", count: 64))
        let a = curl(mock.port, zero)
        #expect(a.status == 400 && a.reason == "BadDeviceToken", "\(a)")
        let b = curl(mock.port, zero.with("authorization", "bearer not.a.jwt"))
        #expect(b.status == 403 && b.reason == "InvalidProviderToken", "\(b)")
    }

    @Test("Request header blocks are counted in HPACK bytes, and apart once a connection is warm")
    func headerBytes() throws {
        let mock = try Fixture.mock()
        let n = MockStatistics.headerWarmup + 10
        let (answers, status) = curl(mock.port, Array(repeating: Request(), count: n))
        #expect(status == 0 && answers.count == n && answers.allSatisfy { $0.status == 200 })
        let s = mock.statistics()
        #expect(s.headerBlocks == UInt64(n) && s.warmHeaderBlocks == 10, "\(s)")
        // Encoded, not raw: HPACK's indexing and Huffman coding make a block smaller than
        // its names and values (curl marks none of these never-index).
        let request = Request()
        let raw = ":method".count + request.method.count + ":path".count + request.path.count + ":scheme".count
            + "https".count + ":authority".count + "127.0.0.1:\(mock.port)".count
            + request.headers.reduce(0) { $0 + $1.count - 2 }   // "name: value" less ": "
        let warm = try #require(s.warmHeaderBytesPerRequest)
        let first = Double(s.headerBlockBytes - s.warmHeaderBlockBytes) / Double(MockStatistics.headerWarmup)
        #expect(warm > 0 && warm < Double(raw), "\(warm) of \(raw)")
        #expect(warm <= first)
    }
}
