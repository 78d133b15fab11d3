import Foundation
import Testing
@testable import Service
@testable import ServiceDelivery

/// The apns-ids a fan-out chooses: canonical version 7 UUIDs (APNS-PROTOCOL.md:
/// "apns-id: a canonical UUID, lower case"), increasing, so that the log's unique
/// index takes them at its end.
@Suite struct APNsIDTests {
    @Test func idsAreCanonicalVersion7AndIncreasing() {
        var ids = APNsIDs()
        let made = (0..<20_000).map { _ in ids.next() }
        #expect(Set(made).count == made.count)
        #expect(made == made.sorted(), "each id sorts after the one before")
        for id in made.prefix(100) {
            #expect(UUID(uuidString: id) != nil && id == id.lowercased() && id.utf8.count == 36)
            let chars = Array(id)
            #expect(chars[14] == "7", "version 7")
            #expect("89ab".contains(chars[19]), "RFC 9562 variant")
        }
    }

    @Test func theTimeIsInTheFirstFortyEightBits() {
        let millis: UInt64 = 1_795_000_000_123
        var ids = APNsIDs(now: { millis })
        let id = ids.next()
        let hex = id.replacingOccurrences(of: "-", with: "").prefix(12)
        #expect(UInt64(hex, radix: 16) == millis)
    }

    @Test func aClockThatStepsBackOrAFullMillisecondNeverGoesBackwards() {
        var clock: UInt64 = 1_000_000
        var ids = APNsIDs(now: { clock })
        var made: [String] = []
        for _ in 0..<5_000 { made.append(ids.next()) }   // more than 4,096 in one millisecond
        clock = 999_000                                  // the clock steps back a second
        for _ in 0..<10 { made.append(ids.next()) }
        #expect(made == made.sorted())
        #expect(Set(made).count == made.count)
    }
}
