@testable import APNs
import Testing

/// The package's one JSON reader, read value by value: what the service's request
/// bodies and apns-send's lines go through (compacting is `PayloadTests`'s).
@Suite struct JSONReaderTests {
    /// Every member and item decoded into text, in order: `key=value` for members.
    static func walk(_ text: String, rules: JSONReader.Rules = .init()) throws(JSONReader.Failure) -> [String] {
        var out: [String] = []
        func value(_ r: inout JSONReader) throws(JSONReader.Failure) {
            switch r.peekKind() {
            case .object?: try r.members { (key, r) throws(JSONReader.Failure) in out.append(key + "="); try value(&r) }
            case .array?: try r.items { (r) throws(JSONReader.Failure) in try value(&r) }
            case .string?: out.append(try r.string())
            case .number?: out.append(try r.number())
            case .bool?: out.append(String(try r.bool()))
            case .null?: _ = try r.null(); out.append("null")
            case nil: _ = try r.skipValue()
            }
        }
        try JSONReader.read(Array(text.utf8), rules: rules) { (r) throws(JSONReader.Failure) in
            try value(&r)
            try r.end()
        }
        return out
    }

    @Test func membersAndItemsComeInTheOrderWrittenWithStringsUnescapedAndNumbersAsSpelled() throws {
        #expect(try Self.walk(#" {"b": [1e3, -0.50, true, null], "a": "x\"\u00e9\ud83d\ude00\n"} "#)
                == ["b=", "1e3", "-0.50", "true", "null", "a=", "x\"é😀\n"])
    }

    @Test func aValueTheBodyLeavesUnreadIsCheckedAndSkipped() throws {
        var seen: [String] = []
        try JSONReader.read(Array(#"{"skip":{"deep":[1,{"x":"y"}]},"take":"it"}"#.utf8)) { (r) throws(JSONReader.Failure) in
            try r.members { (key, r) throws(JSONReader.Failure) in
                if key == "take" { seen.append(try r.string()) }
            }
            try r.end()
        }
        #expect(seen == ["it"])
        #expect(throws: JSONReader.Failure.syntax(offset: 13, expected: "a value")) {
            try JSONReader.read(Array(#"{"skip":[1,2,]}"#.utf8)) { (r) throws(JSONReader.Failure) in
                try r.members { (_, _) throws(JSONReader.Failure) in }
            }
        }
    }

    @Test func aSpanIsTheValueAsWritten() throws {
        let text = Array(#"{"payload": {"aps" : {"alert":"\u0041"}} ,"n":1}"#.utf8)
        let span = try JSONReader.read(text) { (r) throws(JSONReader.Failure) -> Range<Int>? in
            var found: Range<Int>?
            try r.members { (key, r) throws(JSONReader.Failure) in if key == "payload" { found = try r.skipValue() } }
            return found
        }
        #expect(span.map { String(decoding: text[$0], as: UTF8.self) } == #"{"aps" : {"alert":"\u0041"}}"#)
    }

    @Test func theStrictRulesRefuseAKeyTwiceAndUPlus0000() {
        let strict = JSONReader.Rules(uniqueKeys: true, noNUL: true)
        #expect(throws: JSONReader.Failure.duplicateKey("id", offset: 9)) { try Self.walk(#"{"id":1, "id":2}"#, rules: strict) }
        #expect(throws: JSONReader.Failure.nul(offset: 7)) { try Self.walk(#"{"a":"x\u0000"}"#, rules: strict) }
        // Without them, both are JSON (RFC 8259 allows them).
        #expect((try? Self.walk(#"{"id":1, "id":2}"#)) == ["id=", "1", "id=", "2"])
        #expect((try? Self.walk(#"["\u0000"]"#)) == ["\u{0}"])
        #expect(JSONReader.Failure.duplicateKey("a\u{1}b", offset: 3).description == #"duplicate key "a\u0001b" at byte 3"#)
    }

    @Test func anEscapeMustNameACharacterAndDepthIsBounded() {
        #expect(throws: JSONReader.Failure.syntax(offset: 8, expected: "a low surrogate")) { try Self.walk(#"["\ud83d"]"#) }
        #expect(throws: JSONReader.Failure.syntax(offset: 2, expected: "a Unicode scalar")) { try Self.walk(#"["\ude00"]"#) }
        let deep = String(repeating: "[", count: 5) + String(repeating: "]", count: 5)
        #expect(throws: JSONReader.Failure.tooDeep(limit: 4)) { try Self.walk(deep, rules: .init(maxDepth: 4)) }
        #expect((try? Self.walk(deep, rules: .init(maxDepth: 5))) == [])
    }

    @Test func aNumberIsCheckedAsJSONSpellsIt() {
        #expect(JSONValue(number: "-12.5e+3") == .number("-12.5e+3"))
        for bad in ["", " 1", "1 ", "01", "1.", ".5", "+1", "1e", "--1", "1x"] {
            #expect(JSONValue(number: bad) == nil, "\(bad)")
        }
    }
}
