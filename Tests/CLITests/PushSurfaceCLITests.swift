import APNsMock
import Foundation
import TestSupport
import Testing

/// apns-send --push-type accessory and widgets: the topic suffix each needs, and a
/// widgets push's one payload.
@Suite struct PushSurfaceCLITests {
    @Test func anAccessoryPushGoesToItsTopic() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(1)[0] + "\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--push-type", "accessory",
                                                scratch.file("a.json", #"{"aps":{"alert":"paired"}}"#), tokens])
        #expect(r.status == 0, "\(r.stderr)")
        let request = try #require(mock.recordedRequests().first)
        #expect(request.header("apns-push-type") == "accessory")
        #expect(request.header("apns-topic") == "\(CLI.pki.topic).push-type.accessory")
        #expect(request.status == 200)
    }

    @Test func aWidgetsPushCarriesContentChanged() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(1)[0] + "\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--push-type", "widgets",
                                                scratch.file("w.json", "{ \"aps\": { \"content-changed\": true } }"), tokens])
        #expect(r.status == 0, "\(r.stderr)")
        let request = try #require(mock.recordedRequests().first)
        #expect(request.header("apns-topic") == "\(CLI.pki.topic).push-type.widgets")
        #expect(request.body == Array(#"{"aps":{"content-changed":true}}"#.utf8))
        #expect(request.status == 200)
    }

    @Test func aWidgetsPushWithAnotherPayloadIsAUsageError() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let scratch = Scratch()
        let tokens = scratch.file("t.txt", CLI.tokens(1)[0] + "\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--push-type", "widgets",
                                                scratch.file("w.json", #"{"aps":{"alert":"hi"}}"#), tokens])
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stderr.contains("content-changed"), "\(r.stderr)")
        #expect(mock.recordedRequests().isEmpty)
    }
}
