import Foundation
import TestSupport
import Testing
@testable import APNs

/// ARCHITECTURE.md: "Payload must be a JSON object within 4096 bytes (5120 for voip),
/// counted after insignificant whitespace is removed (the payload is sent that way,
/// key order and number spelling kept)".
@Suite struct PayloadTests {
    @Test func compactionKeepsKeyOrderNumbersAndEscapes() throws {
        let text = """
        {
          "z" : 1.50,  "a":[ 1e3 , -0, true,false , null ],
          "s": "a \\"b\\" \\u00e9 \\n  tab\\t", "é" : { }
        }
        """
        let payload = try Payload(json: text)
        #expect(String(decoding: payload.bytes, as: UTF8.self)
            == #"{"z":1.50,"a":[1e3,-0,true,false,null],"s":"a \"b\" \u00e9 \n  tab\t","é":{}}"#)
    }

    /// Only white space between tokens goes, wherever it is (ends included); text
    /// without any comes back byte for byte, spaces inside strings kept.
    @Test(arguments: [
        (#"{"a":[1,"x y",{}],"b":"\" "}"#, #"{"a":[1,"x y",{}],"b":"\" "}"#),
        (" \n{\"a\":1}\t ", #"{"a":1}"#),
        ("{ }", "{}"),
        ("{\"a\" :\r\n[ 1 ,2 ] ,\"b\":null}", #"{"a":[1,2],"b":null}"#),
        ("{\"a\":1} ", #"{"a":1}"#),
    ])
    func compactionCutsOnlyWhiteSpaceBetweenTokens(text: String, compact: String) throws {
        #expect(try Payload(json: text).bytes == Array(compact.utf8))
    }

    @Test func everyFixturePayloadCompactsAndStaysUnderTheLimit() throws {
        let names = ["order_status_changed", "enquiry_received", "broadcast_mutable", "task_assignment",
                     "quote_approved", "quote_rejected", "ticket_reopened"]
        for name in names {
            let data = try #require(FileManager.default.contents(atPath: Package.fixture("examples/payloads/\(name).json")))
            let payload = try Payload(json: data)
            #expect(payload.count < data.count)
            #expect(payload.count <= PushType.alert.payloadLimit)
            #expect(!payload.bytes.contains(UInt8(ascii: "\n")))
        }
    }

    @Test(arguments: [
        ("", Payload.Error.empty),
        ("   \n", Payload.Error.empty),
        ("[1,2]", Payload.Error.notAnObject),
        ("\"aps\"", Payload.Error.notAnObject),
    ])
    func refusesWhatIsNotAnObject(text: String, error: Payload.Error) {
        #expect(throws: error) { try Payload(json: text) }
    }

    @Test(arguments: [
        "{", "{\"a\":}", "{\"a\":1,}", "{'a':1}", "{\"a\":01}", "{\"a\":1.}", "{\"a\":\"\u{01}\"}",
        "{\"a\":\"\\x\"}", "{\"a\":tru}", "{\"a\":1} x", "{\"a\" 1}", "{\"a\":NaN}",
    ])
    func refusesMalformedJSON(text: String) {
        #expect(throws: Payload.Error.self) { try Payload(json: text) }
    }

    @Test func refusesInvalidUTF8AndNUL() {
        #expect(throws: Payload.Error.self) { try Payload(json: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D]) }
        #expect(throws: Payload.Error.self) { try Payload(json: [0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xED, 0xA0, 0x80, 0x22, 0x7D]) }
        #expect(throws: Payload.Error.self) { try Payload(json: Array("{\"a\":1}".utf8) + [0]) }
    }

    @Test func refusesDeepNestingWithoutCrashing() {
        let deep = String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000)
        #expect(throws: Payload.Error.notJSON("nested deeper than 64 levels")) { try Payload(json: deep) }
    }

    @Test func builderWritesTheApsDictionaryThenCustomKeys() {
        let payload = Payload(
            aps: APS(alert: .init(title: "Order Ready", body: "Order #1234 is ready for collection"),
                     badge: 1, sound: .named("default"), mutableContent: true, interruptionLevel: .timeSensitive),
            custom: ["type": "order_status_changed", "entity_type": "order", "entity_id": "order-uuid-here"])
        #expect(String(decoding: payload.bytes, as: UTF8.self) == """
            {"aps":{"alert":{"title":"Order Ready","body":"Order #1234 is ready for collection"},"badge":1,"sound":"default","mutable-content":1,"interruption-level":"time-sensitive"},"type":"order_status_changed","entity_type":"order","entity_id":"order-uuid-here"}
            """)
        // What the builder writes, the validator accepts unchanged.
        #expect(try! Payload(json: payload.bytes).bytes == payload.bytes)
    }

    @Test func builderEscapesStrings() {
        let payload = Payload(aps: APS(alert: .init(body: "quote \" back\\slash \n newline \u{1}")))
        #expect(String(decoding: payload.bytes, as: UTF8.self)
            == #"{"aps":{"alert":{"body":"quote \" back\\slash \n newline \u0001"}}}"#)
    }
}
