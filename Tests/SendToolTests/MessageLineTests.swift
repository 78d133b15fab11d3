import APNs
import Foundation
import Testing
import TestSupport
@testable import apns_send

/// `--messages` lines, parsed in-process: what becomes a message (with every header
/// as given) and the exact local record of every line that cannot be sent.
@Suite struct MessageLineTests {
    static let token = String(repeating: "ab", count: 32)
    static let defaults = MessageDefaults(topic: "com.example.app")

    static func parse(_ line: String, number: Int = 1, defaults: MessageDefaults = defaults) -> MessageLine.Parsed {
        MessageLine.parse(Array(line.utf8), line: number, defaults: defaults)
    }

    static func message(_ line: String, defaults: MessageDefaults = defaults) -> Message<LineContext>? {
        if case .message(let m) = parse(line, defaults: defaults) { return m }
        return nil
    }

    /// The local record, or nil when the line became a message.
    static func refused(_ line: String, number: Int = 1) -> (DeliveryResult, LineContext)? {
        if case .refused(let r, let c) = parse(line, number: number) { return (r, c) }
        return nil
    }

    @Test func everyKeyIsTakenAsGiven() throws {
        let line = #"{"token":"\#(Self.token.uppercased())","payload":{"z":1, "aps":{"alert":"hi \u00e9"},"n":2.50},"id":"evt-1","push_type":"background","priority":5,"collapse_id":"order-7","expiration":0,"topic":"com.other.app","environment":"sandbox","x-unknown":[1,{"a":"}"}]}"#
        let m = try #require(Self.message(line))
        #expect(m.token == Self.token, "lower-cased")
        #expect(String(decoding: m.notification.payload.bytes, as: UTF8.self) == #"{"z":1,"aps":{"alert":"hi \u00e9"},"n":2.50}"#,
                "compact, key order, escapes and number spelling kept")
        #expect(m.notification.pushType == .background)
        #expect(m.notification.priority == .powerConsiderate)
        #expect(m.notification.collapseID == "order-7")
        #expect(m.notification.expiration == .immediately)
        #expect(m.notification.topic == "com.other.app")
        #expect(m.environment == .sandbox)
        #expect(m.context == LineContext(line: 1, id: "evt-1"))
    }

    @Test func leftOutKeysFallBackToTheFlags() throws {
        let bare = #"{"token":"\#(Self.token)","payload":{"aps":{}}}"#
        let m = try #require(Self.message(bare))
        #expect(m.notification.pushType == .alert)
        #expect(m.notification.priority == nil, "no header: APNs' 10")
        #expect(m.notification.expiration == nil && m.notification.collapseID == nil)
        #expect(m.notification.topic == "com.example.app")
        #expect(m.environment == nil, "the configuration's (--env)")
        #expect(m.context == LineContext(line: 1, id: nil))

        var flags = MessageDefaults(topic: "com.flag.app")
        flags.pushType = .voip
        flags.priority = .low
        flags.expiration = .at(unixSeconds: 1_900_000_000)
        flags.collapseID = "flag"
        let f = try #require(Self.message(bare, defaults: flags))
        #expect(f.notification.topic == "com.flag.app.voip")
        #expect(f.notification.priority == .low && f.notification.collapseID == "flag")
        #expect(f.notification.expiration == .at(unixSeconds: 1_900_000_000))
        let nulls = #"{"token":"\#(Self.token)","payload":{},"id":null,"priority":null,"collapse_id":null,"topic":null,"environment":null,"push_type":null}"#
        let n = try #require(Self.message(nulls, defaults: flags), "null is the key left out")
        #expect(n.notification.collapseID == "flag" && n.context.id == nil)
    }

    @Test func theApnsIDIsACanonicalUUIDFixedByLineNumberAndText() throws {
        let line = #"{"token":"\#(Self.token)","payload":{}}"#
        let a = try #require(Self.message(line)).apnsID!
        #expect(a.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil, "\(a)")
        #expect(MessageLine.apnsID(Array(line.utf8), line: 1) == a, "the same on a resend")
        #expect(MessageLine.apnsID(Array(line.utf8), line: 2) != a, "a repeat on another line is another message")
    }

    struct Bad: CustomStringConvertible {
        let description: String
        let line: String
        let reason: String
        let says: [String]
        var token = ""
        var id: String? = nil
    }

    static let t = MessageLineTests.token
    static let bad: [Bad] = [
        Bad(description: "not JSON", line: #"{"token":"\#(t)","payload":{}"#, reason: "InvalidMessage", says: ["not valid JSON", "byte"]),
        Bad(description: "a comment", line: "# a comment", reason: "InvalidMessage", says: ["not valid JSON"]),
        Bad(description: "not an object", line: #"["\#(t)"]"#, reason: "InvalidMessage", says: ["not a JSON object"]),
        Bad(description: "a string", line: #""\#(t)""#, reason: "InvalidMessage", says: ["not a JSON object"]),
        Bad(description: "missing token", line: #"{"payload":{},"id":"e1"}"#, reason: "InvalidMessage", says: [#"no "token""#], id: "e1"),
        Bad(description: "missing payload", line: #"{"token":"\#(t)"}"#, reason: "InvalidMessage", says: [#"no "payload""#], token: t),
        Bad(description: "missing both", line: "{}", reason: "InvalidMessage", says: [#"no "token""#, #"no "payload""#]),
        Bad(description: "payload not an object", line: #"{"token":"\#(t)","payload":"hi"}"#, reason: "InvalidMessage",
            says: [#""payload" must be a JSON object"#], token: t),
        Bad(description: "payload an array", line: #"{"token":"\#(t)","payload":[{}]}"#, reason: "InvalidMessage",
            says: [#""payload" must be a JSON object"#], token: t),
        Bad(description: "token a number", line: #"{"token":12,"payload":{}}"#, reason: "InvalidMessage", says: [#""token" must be a string"#]),
        Bad(description: "id a number", line: #"{"token":"\#(t)","payload":{},"id":7}"#, reason: "InvalidMessage",
            says: [#""id" must be a string"#], token: t),
        Bad(description: "unknown push_type", line: #"{"token":"\#(t)","payload":{},"push_type":"banner"}"#, reason: "InvalidMessage",
            says: [#""push_type" 'banner' is not one of alert, background"#], token: t),
        Bad(description: "priority 7", line: #"{"token":"\#(t)","payload":{},"priority":7}"#, reason: "InvalidMessage",
            says: [#""priority" 7 is not 10, 5 or 1"#], token: t),
        Bad(description: "priority a string", line: #"{"token":"\#(t)","payload":{},"priority":"10"}"#, reason: "InvalidMessage",
            says: [#""priority" '10' is not 10, 5 or 1"#], token: t),
        Bad(description: "priority 10.0", line: #"{"token":"\#(t)","payload":{},"priority":10.0}"#, reason: "InvalidMessage",
            says: [#""priority" 10.0"#], token: t),
        Bad(description: "background at 10", line: #"{"token":"\#(t)","payload":{},"push_type":"background","priority":10}"#,
            reason: "InvalidMessage", says: ["priority 10 is not allowed for background"], token: t),
        Bad(description: "negative expiration", line: #"{"token":"\#(t)","payload":{},"expiration":-1}"#, reason: "InvalidMessage",
            says: [#""expiration" -1 is not a UNIX time"#], token: t),
        Bad(description: "fractional expiration", line: #"{"token":"\#(t)","payload":{},"expiration":1.5}"#, reason: "InvalidMessage",
            says: [#""expiration" 1.5"#], token: t),
        Bad(description: "environment staging", line: #"{"token":"\#(t)","payload":{},"environment":"staging"}"#, reason: "InvalidMessage",
            says: [#""environment" 'staging' is not sandbox or production"#], token: t),
        Bad(description: "CRLF in collapse_id", line: #"{"token":"\#(t)","payload":{},"collapse_id":"abc\r\nx-injected: yes"}"#,
            reason: "InvalidMessage", says: [#""collapse_id" has a control character, 0x0d (CR)"#], token: t),
        Bad(description: "DEL in collapse_id", line: #"{"token":"\#(t)","payload":{},"collapse_id":"a\u007f"}"#,
            reason: "InvalidMessage", says: [#""collapse_id" has a control character, 0x7f"#], token: t),
        Bad(description: "LF in topic", line: #"{"token":"\#(t)","payload":{},"topic":"com.example.app\nx: y"}"#,
            reason: "InvalidMessage", says: [#""topic" has a control character, 0x0a (LF)"#], token: t),
        Bad(description: "tab in topic", line: #"{"token":"\#(t)","payload":{},"topic":"com.example\tapp"}"#,
            reason: "InvalidMessage", says: [#""topic" has a control character, 0x09"#], token: t),
        Bad(description: "collapse_id over 64 bytes", line: #"{"token":"\#(t)","payload":{},"collapse_id":"\#(String(repeating: "c", count: 65))"}"#,
            reason: "InvalidMessage", says: [#""collapse_id" is 65 bytes"#], token: t),
        Bad(description: "token given twice", line: #"{"token":"\#(t)","payload":{},"token":"\#(t)"}"#, reason: "InvalidMessage",
            says: [#""token" given twice"#], token: t),
        Bad(description: "several problems", line: #"{"token":"\#(t)","payload":{},"priority":3,"environment":"dev","id":"e9"}"#,
            reason: "InvalidMessage", says: [#""priority" 3"#, #"; "environment" 'dev'"#], token: t, id: "e9"),
        Bad(description: "malformed token", line: #"{"token":"xyz","payload":{},"id":"e2"}"#, reason: "BadDeviceToken",
            says: ["64 to 200 hex digits"], token: "xyz", id: "e2"),
        Bad(description: "odd token length", line: #"{"token":"\#(t)a","payload":{}}"#, reason: "BadDeviceToken",
            says: ["64 to 200 hex digits"], token: t + "a"),
        Bad(description: "payload over 4096", line: #"{"token":"\#(t)","payload":{"aps":{"alert":"\#(String(repeating: "x", count: 4077))"}}}"#,
            reason: "PayloadTooLarge", says: ["4097 bytes", "4096"], token: t),
        Bad(description: "voip payload over 5120",
            line: #"{"token":"\#(t)","push_type":"voip","payload":{"aps":{"alert":"\#(String(repeating: "x", count: 5101))"}}}"#,
            reason: "PayloadTooLarge", says: ["5121 bytes", "5120"], token: t),
    ]

    @Test(arguments: bad)
    func aLineThatCannotBeSentGetsExactlyItsRecord(_ c: Bad) throws {
        let (r, context) = try #require(Self.refused(c.line, number: 42), "\(c) was accepted")
        #expect(r.status == 0 && r.apnsID == nil && r.attempts == 0 && r.timestamp == nil)
        #expect(r.reason?.rawValue == c.reason)
        #expect(r.token == c.token)
        #expect(context == LineContext(line: 42, id: c.id))
        for text in c.says {
            #expect(r.error?.contains(text) == true, "'\(text)' not in \(r.error ?? "nil")")
        }
        #expect(r.error?.utf8.contains { $0 < 0x20 } == false, "the error text is one clean line")
        var out: [UInt8] = []
        apns_send.Record.json(r, context: context, to: &out)
        let object = try JSONSerialization.jsonObject(with: Data(out)) as! [String: Any]
        #expect(object["line"] as? Int == 42)
        #expect(object["reason"] as? String == c.reason)
        #expect((object["id"] as? String) == c.id)
        #expect(object["error"] as? String == r.error)
    }

    @Test func aVoipPayloadUpTo5120IsAccepted() throws {
        let line = #"{"token":"\#(Self.token)","push_type":"voip","payload":{"aps":{"alert":"\#(String(repeating: "x", count: 5100))"}}}"#
        #expect(try #require(Self.message(line)).notification.payload.count == 5120)
    }

    @Test func noTopicAnywhereIsTheLinesProblem() throws {
        let (r, _) = try #require({ () -> (DeliveryResult, LineContext)? in
            if case .refused(let r, let c) = Self.parse(#"{"token":"\#(Self.token)","payload":{}}"#, defaults: MessageDefaults()) { return (r, c) }
            return nil
        }())
        #expect(r.reason?.rawValue == "InvalidMessage")
        #expect(r.error?.contains("--topic") == true)
    }

    @Test func escapedIDsAndSurrogatePairsAreUnescaped() throws {
        let m = try #require(Self.message(#"{"token":"\#(Self.token)","payload":{},"id":"\ud83d\ude00 \"q\" é"}"#))
        #expect(m.context.id == "😀 \"q\" é")
        #expect(Self.refused(#"{"token":"\#(Self.token)","payload":{},"id":"\ud83d"}"#) != nil, "a lone surrogate is refused")
    }
}

/// The file side: numbering, blank lines, resume by line, the count after an interruption.
@Suite struct MessageLinesTests {
    static func line(_ i: Int, id: String? = nil) -> String {
        #"{"token":"\#(CLITokens.token(i))","payload":{"aps":{"alert":"m\#(i)"}}\#(id.map { #","id":"\#($0)""# } ?? "")}"#
    }

    @Test func linesAreNumberedAsAnEditorCountsThemAndBlanksAreSkipped() throws {
        let scratch = Scratch()
        let text = "\u{FEFF}" + Self.line(0) + "\r\n\r\n   \n" + Self.line(1) + "\nnot json\n" + Self.line(0) + "\n" + Self.line(3)   // no final newline
        let lines = try MessageLines(path: scratch.file("m.jsonl", text), defaults: MessageDefaults(topic: "t"), resumed: nil)
        var refused: [(DeliveryResult, LineContext)] = []
        lines.refused = { refused.append(($0, $1)) }
        #expect(lines.hasMessageLines())
        let sent = Array(lines)
        #expect(sent.map(\.context.line) == [1, 4, 6, 7])
        #expect(sent.map(\.token) == [0, 1, 0, 3].map(CLITokens.token), "repeats are not merged")
        #expect(refused.map(\.1.line) == [5])
        #expect(lines.messageLines == 5)
        #expect(lines.failure == nil)
    }

    @Test func aResumedFileSettlesLinesNotTokens() throws {
        let scratch = Scratch()
        let text = (0..<6).map { Self.line($0 % 2) }.joined(separator: "\n")
        let records = [
            #"{"token":"\#(CLITokens.token(0))","status":200,"apns_id":"x","reason":null,"timestamp":null,"attempts":1,"line":1}"#,
            #"{"token":"\#(CLITokens.token(1))","status":503,"apns_id":"x","reason":"ServiceUnavailable","timestamp":null,"attempts":6,"line":2}"#,
            #"{"token":"","status":0,"apns_id":null,"reason":"InvalidMessage","timestamp":null,"attempts":0,"line":3,"error":"x"}"#,
            #"{"token":"\#(CLITokens.token(1))","status":410,"apns_id":"x","reason":"Unregistered","timestamp":1,"attempts":1,"line":4,"id":"e"}"#,
        ].joined(separator: "\n") + "\n"
        let resumed = try ResumedResults(path: scratch.file("r.jsonl", records), format: nil, layout: .messages)
        let lines = try MessageLines(path: scratch.file("m.jsonl", text), defaults: MessageDefaults(topic: "t"), resumed: resumed)
        #expect(Array(lines).map(\.context.line) == [2, 5, 6], "line 1 delivered, 3 refused locally, 4 410: settled; 2 (503) again")
        #expect(lines.settled == 3)
    }

    @Test func recordsOfTheOtherKindOfRunAreRefused() throws {
        let scratch = Scratch()
        let tokenRecord = #"{"token":"aa","status":200,"apns_id":null,"reason":null,"timestamp":null,"attempts":1}"# + "\n"
        #expect(throws: UsageError.self) {
            try ResumedResults(path: scratch.file("t.jsonl", tokenRecord), format: nil, layout: .messages).forEachSettledRecord { _ in }
        }
        let messageRecord = #"{"token":"aa","status":200,"apns_id":null,"reason":null,"timestamp":null,"attempts":1,"line":1}"# + "\n"
        #expect(throws: UsageError.self) {
            try ResumedResults(path: scratch.file("m.jsonl", messageRecord), format: nil, layout: .tokens).forEachSettledRecord { _ in }
        }
        let tokenCSV = "token,status,apns_id,reason,timestamp,attempts\r\naa,200,,,,1\r\n"
        #expect(throws: UsageError.self) { try ResumedResults(path: scratch.file("t.csv", tokenCSV), format: nil, layout: .messages) }
    }

    @Test func csvRecordsCarryLineIDAndErrorAndReadBack() throws {
        let r = DeliveryResult(token: "xyz", apnsID: nil, status: 0, reason: .badDeviceToken, attempts: 0, error: "bad, \"really\"")
        var out = RecordLayout.messages.csvHeader
        apns_send.Record.csv(r, context: LineContext(line: 9, id: "e,1"), to: &out)
        let text = String(decoding: out, as: UTF8.self)
        #expect(text == "token,status,apns_id,reason,timestamp,attempts,line,id,error\r\nxyz,0,,BadDeviceToken,,0,9,\"e,1\",\"bad, \"\"really\"\"\"\r\n")
        let scratch = Scratch()
        let resumed = try ResumedResults(path: scratch.file("r.csv", text), format: nil, layout: .messages)
        #expect(resumed.format == .csv)
        var lines: [Int?] = []
        try resumed.forEachSettledRecord { lines.append($0.line) }
        #expect(lines == [9])
    }

    @Test func theCountAfterAnInterruptionSkipsBlankAndSettledLines() throws {
        let scratch = Scratch()
        let text = (0..<10).map { Self.line($0) }.joined(separator: "\n\n")
        let lines = try MessageLines(path: scratch.file("m.jsonl", text), defaults: MessageDefaults(topic: "t"), resumed: nil)
        _ = lines.next()
        _ = lines.next()
        #expect(lines.countRemaining() == 8)
    }

    @Test func aLineLongerThanTheReaderTakesIsRefusedNotGuessed() throws {
        let scratch = Scratch()
        let long = #"{"token":"\#(CLITokens.token(1))","payload":{},"pad":"\#(String(repeating: "p", count: 70_000))"}"#
        let lines = try MessageLines(path: scratch.file("m.jsonl", long + "\n" + Self.line(2) + "\n"), defaults: MessageDefaults(topic: "t"),
                                     resumed: nil)
        var refused: [DeliveryResult] = []
        lines.refused = { r, _ in refused.append(r) }
        #expect(Array(lines).map(\.context.line) == [2])
        #expect(refused.first?.error?.contains("longer than") == true)
    }

    @Test func lineSetHoldsAMillionLinesInBits() {
        var s = LineSet()
        for n in stride(from: 1, through: 1_000_000, by: 3) { s.insert(n) }
        s.insert(1)
        #expect(s.count == 333_334)
        #expect(s.contains(1) && s.contains(999_999 - 2) && !s.contains(2) && !s.contains(0) && !s.contains(2_000_000))
    }
}

/// Distinct 64-hex-digit tokens for in-process tests.
enum CLITokens {
    static func token(_ i: Int) -> String {
        let h = String(UInt64(i + 1) &* 0x9E37_79B9_7F4A_7C15, radix: 16)
        return String(repeating: "0", count: 64 - h.count) + h
    }
}
