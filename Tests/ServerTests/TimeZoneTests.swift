import Foundation
import Testing
import TestSupport

/// Every name of the system's tz database is a time zone a user may choose: the
/// canonical zones (`zone1970.tab`) and the older names kept as links (the
/// `backward` file, or the `L` lines of `tzdata.zi` where only that is installed).
/// Devices report either kind ("Asia/Kolkata", "Asia/Calcutta").
@Suite struct TimeZoneTests {
    static let directory = "/usr/share/zoneinfo"

    /// The third column of `zone1970.tab`.
    static func canonicalZones() throws -> [String] {
        let text = try String(contentsOfFile: directory + "/zone1970.tab", encoding: .utf8)
        return text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#") else { return nil }
            let columns = line.split(separator: "\t")
            return columns.count >= 3 ? String(columns[2]) : nil
        }
    }

    /// The links' names: `Link TARGET NAME` in `backward`, `L TARGET NAME` in `tzdata.zi`.
    static func linkNames() throws -> [String] {
        let files = [directory + "/backward", directory + "/tzdata.zi"]
        guard let text = files.lazy.compactMap({ try? String(contentsOfFile: $0, encoding: .utf8) }).first else {
            throw CocoaError(.fileNoSuchFile)
        }
        return text.split(separator: "\n").compactMap { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count >= 3, words[0] == "Link" || words[0] == "L" else { return nil }
            return String(words[2])
        }
    }

    @Test func everyZoneOfTheSystemDatabaseIsAccepted() async throws {
        let canonical = try Self.canonicalZones(), links = try Self.linkNames()
        #expect(canonical.contains("Asia/Kolkata") && links.contains("Asia/Calcutta"))
        let server = InProcessServer(sandbox: nil, production: nil)
        try await server.start()
        defer { Task { await server.stop() } }
        var refused: [String] = []
        for zone in canonical + links {
            let saved = await server.request("PUT", "/api/user/push-preferences?appType=staff",
                                             body: #"{"timeZone":"\#(zone)"}"#, bearer: Harness.jwt(sub: "tz"))
            if saved.status != 200 { refused.append("\(zone): \(saved.status) \(saved.body)") }
        }
        #expect(refused.isEmpty, "\(refused.count) refused: \(refused.prefix(20))")
        // Still only names: no paths out of the database, no offsets or tables.
        for bad in ["../etc/passwd", "/etc/localtime", "Asia/../Asia/Kolkata", "zone1970.tab", "posix/Asia/Kolkata",
                    "GMT+2", "localtime", "EST5EDT,M3.2.0,M11.1.0", "", "Nowhere/Special"] {
            let saved = await server.request("PUT", "/api/user/push-preferences?appType=staff",
                                             body: #"{"timeZone":"\#(bad)"}"#, bearer: Harness.jwt(sub: "tz"))
            #expect(saved.status == 400, "\(bad): \(saved)")
        }
        await server.stop()
    }
}
