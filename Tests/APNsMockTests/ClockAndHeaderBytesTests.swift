import APNsMock
import Foundation
import Testing
import TestSupport

/// What a set-up check reads from the mock: its clock (error answers' `date`
/// header, and the clock provider tokens are judged by), and the all-zero token it
/// refuses only after the credentials.
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
}
