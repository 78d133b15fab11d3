import APNsMock
import Foundation
import TestSupport
import Testing

/// `apns-send --broadcast CHANNEL_ID PAYLOAD.json` and the channel flags, as a
/// subprocess against the mock over TLS: one record per run, exit 0/1/2.
@Suite struct BroadcastCLITests {
    static let update = CLI.examples.appendingPathComponent("liveactivity-update.json").path
    static let start = CLI.examples.appendingPathComponent("liveactivity-start.json").path

    static func object(_ stdout: String) throws -> [String: Any] {
        let lines = CLI.lines(stdout)
        try #require(lines.count == 1, "one record: \(stdout)")
        return try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
    }

    /// docs/cli.md's commands, in order: create, broadcast, read, list, delete.
    @Test func aChannelsWholeLifeFromTheCommandLine() async throws {
        let mock = try CLI.mock()
        let base = CLI.arguments(mock)

        let created = await CLI.run(base + ["--create-channel", "--storage-policy", "0"])
        #expect(created.status == 0, "\(created.stderr)")
        let c = try Self.object(created.stdout)
        #expect(c["operation"] as? String == "create" && c["status"] as? Int == 201)
        let id = try #require(c["channel_id"] as? String)
        #expect(c["apns_request_id"] as? String != nil)

        let sent = await CLI.run(base + ["--broadcast", id, "--priority", "10", Self.update])
        #expect(sent.status == 0, "\(sent.stderr)")
        let s = try Self.object(sent.stdout)
        #expect(CLI.lines(sent.stdout)[0].hasPrefix(#"{"channel_id":""#))
        #expect(s["channel_id"] as? String == id && s["status"] as? Int == 200 && s["attempts"] as? Int == 1)
        let requestID = try #require(s["apns_request_id"] as? String)
        #expect(s["apns_unique_id"] as? String != nil)
        let wire = try #require(mock.recordedRequests().first { $0.path.hasPrefix("/4/broadcasts/") })
        #expect(wire.header("apns-request-id") == requestID)
        #expect(wire.header("apns-channel-id") == id)
        #expect(wire.header("apns-expiration") == "0")
        #expect(wire.body == CLI.compacted(Array(try Data(contentsOf: URL(fileURLWithPath: Self.update)))))

        let read = try Self.object(await CLI.run(base + ["--read-channel", id]).stdout)
        #expect(read["status"] as? Int == 200 && read["message_storage_policy"] as? Int == 0)
        let list = try Self.object(await CLI.run(base + ["--list-channels"]).stdout)
        #expect(list["channels"] as? [String] == [id])
        let deleted = await CLI.run(base + ["--delete-channel", id])
        #expect(deleted.status == 0)
        #expect(try Self.object(deleted.stdout)["status"] as? Int == 204)
    }

    /// APNs' refusal: exit 1 and the record says why; nothing is lost.
    @Test func aRefusalIsOneRecordAndExitOne() async throws {
        let mock = try CLI.mock()
        let base = CLI.arguments(mock)
        let r = await CLI.run(base + ["--broadcast", "c29tZUNoYW5uZWw=", Self.update])
        #expect(r.status == 1)
        let o = try Self.object(r.stdout)
        #expect(o["status"] as? Int == 400 && o["reason"] as? String == "ChannelNotRegistered")

        let disabled = try CLI.mock { $0.broadcastEnabled = false }
        let d = await CLI.run(CLI.arguments(disabled) + ["--create-channel"])
        #expect(d.status == 1)
        #expect(try Self.object(d.stdout)["reason"] as? String == "FeatureNotEnabled")
    }

    /// Input problems: one line on stderr, exit 2, nothing sent.
    @Test func badInputIsOneLineAndExitTwo() async throws {
        let mock = try CLI.mock()
        let base = CLI.arguments(mock)
        let cases: [([String], String)] = [
            (["--broadcast", "not base64!", Self.update], "is not base64"),
            (["--broadcast", "c29tZUNoYW5uZWw=", Self.start], "can only update or end"),
            (["--broadcast", "c29tZUNoYW5uZWw="], "missing PAYLOAD.json"),
            (["--create-channel", "--list-channels"], "give one of"),
            (["--create-channel", "--storage-policy", "2"], "--storage-policy '2'"),
            (["--read-channel", "%%"], "is not base64"),
        ]
        for (args, words) in cases {
            let r = await CLI.run(base + args)
            #expect(r.status == 2, "\(args)")
            #expect(r.stdout.isEmpty, "\(args)")
            let lines = CLI.lines(r.stderr)
            #expect(lines.count == 1 && lines[0].contains(words), "\(args): \(r.stderr)")
        }
        #expect(mock.statistics().streams == 0)
    }

    /// docs/cli.md's Live Activity line: a push-to-start to a device with the example file,
    /// and a malformed Live Activity payload refused before anything is sent.
    @Test func aLiveActivityStartGoesToADevice() async throws {
        let mock = try CLI.mock()
        let dir = Scratch()
        let tokens = dir.file("tokens.txt", CLI.tokens(1).joined(separator: "\n"))
        let r = await CLI.run(CLI.arguments(mock) + ["--push-type", "liveactivity", Self.start, tokens])
        #expect(r.status == 0, "\(r.stderr)")
        let wire = try #require(mock.recordedRequests().first)
        #expect(wire.header("apns-topic") == "\(CLI.pki.topic).push-type.liveactivity")
        #expect(wire.header("apns-push-type") == "liveactivity")

        let bad = dir.file("bad.json", #"{"aps":{"timestamp":1,"event":"start","content-state":{}}}"#)
        let refused = await CLI.run(CLI.arguments(mock) + ["--push-type", "liveactivity", bad, tokens])
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("attributes-type"))
        #expect(mock.recordedRequests().count == 1)
    }
}
