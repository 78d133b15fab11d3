import Testing
import TestSupport
@testable import APNs

@Suite struct DeviceTokenTests {
    /// Every byte value at a place of each 8-byte step and of the tail: only 0-9
    /// and a-f pass as they are, A-F are lower-cased, anything else is refused.
    @Test(.ownThread) func eachByteIsJudgedWhereverItSits() {
        for length in [64, 66, 70] {
            for at in [0, 1, 7, 8, 31, 56, 63, length - 1] {
                for value in UInt8(1)...UInt8(255) {
                    var bytes = [UInt8](repeating: UInt8(ascii: "0"), count: length)
                    bytes[at] = value
                    let text = String(decoding: bytes, as: UTF8.self)
                    let expected: String? = switch value {
                    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): text
                    case UInt8(ascii: "A")...UInt8(ascii: "F"): text.lowercased()
                    default: nil
                    }
                    #expect(DeviceToken(text)?.hex == expected, "byte \(value) at \(at) of \(length)")
                }
            }
        }
    }

    /// ARCHITECTURE.md: "a token is 64 to 200 hex digits, an even count (64 today;
    /// Apple warns the length may change, so do not assume exactly 64)".
    @Test func acceptsHexOfEvenLengthFrom64To200() {
        #expect(DeviceToken(String(repeating: "ab", count: 32))?.hex == String(repeating: "ab", count: 32))
        #expect(DeviceToken(String(repeating: "0", count: 200)) != nil)
        #expect(DeviceToken(String(repeating: "0", count: 100)) != nil)
    }

    @Test func trimsAndLowercases() {
        let upper = " \t" + String(repeating: "AB", count: 32) + "\r\n"
        #expect(DeviceToken(upper)?.hex == String(repeating: "ab", count: 32))
    }

    @Test(arguments: [
        String(repeating: "a", count: 62), String(repeating: "a", count: 65), String(repeating: "a", count: 202),
        String(repeating: "g", count: 64), String(repeating: "a", count: 32) + " " + String(repeating: "a", count: 31),
        "", "not-a-token", String(repeating: "é", count: 64),
    ])
    func refusesEverythingElse(text: String) {
        #expect(DeviceToken(text) == nil)
    }
}

@Suite struct ReasonTests {
    /// APNS-PROTOCOL.md, "Response" and "Broadcast push (iOS 18)": every reason, spelled as on the wire.
    @Test func everyDocumentedReasonRoundTrips() {
        let documented = """
            BadCollapseId BadDeviceToken BadExpirationDate BadMessageId BadPriority BadTopic DeviceTokenNotForTopic \
            DuplicateHeaders IdleTimeout InvalidPushType MissingDeviceToken MissingTopic PayloadEmpty TopicDisallowed TopicMismatch \
            BadCertificate BadCertificateEnvironment ExpiredProviderToken Forbidden InvalidProviderToken \
            MissingProviderToken UnrelatedKeyIdInToken BadEnvironmentKeyIdInToken BadEnvironmentKeyInToken BadPath \
            MethodNotAllowed Unregistered ExpiredToken PayloadTooLarge TooManyRequests TooManyProviderTokenUpdates \
            InternalServerError ServiceUnavailable Shutdown \
            MissingChannelId BadChannelId ChannelNotRegistered CannotCreateChannelConfig FeatureNotEnabled
            """.split(separator: " ").map(String.init)
        #expect(documented.count == Reason.spellings.count)
        for name in documented {
            let reason = Reason(rawValue: name)
            if case .unknown = reason { Issue.record("\(name) is not known") }
            #expect(reason.rawValue == name)
        }
        #expect(Reason(rawValue: "SomethingNew") == .unknown("SomethingNew"))
    }

    /// "Never retry 400/403/404/405/410/413 for the same token" — except
    /// ExpiredProviderToken: "refresh once, send again"; 429/500/503 are retried.
    @Test func dispositions() {
        #expect(Disposition(status: 400, reason: .badDeviceToken) == .final)
        #expect(Disposition(status: 410, reason: .unregistered) == .final)
        #expect(Disposition(status: 413, reason: .payloadTooLarge) == .final)
        #expect(Disposition(status: 403, reason: .invalidProviderToken) == .final)
        #expect(Disposition(status: 403, reason: .expiredProviderToken) == .refreshTokenAndRetry)
        #expect(Disposition(status: 403, reason: .unrelatedKeyIdInToken) == .resendOnFreshConnection)
        #expect(Disposition(status: 403, reason: .badEnvironmentKeyIdInToken) == .keyRefused)
        #expect(Disposition(status: 400, reason: .topicMismatch) == .final)
        #expect(Disposition(status: 429, reason: .tooManyRequests) == .retryAfterBackoff)
        #expect(Disposition(status: 429, reason: .tooManyProviderTokenUpdates) == .retryAfterBackoff)
        #expect(Disposition(status: 500, reason: .internalServerError) == .retryAfterBackoff)
        #expect(Disposition(status: 503, reason: .shutdown) == .retryAfterBackoff)
        #expect(Disposition(status: 400, reason: .unknown("BadPayload")) == .final)
        #expect(Reason.unregistered.deactivatesToken && Reason.expiredToken.deactivatesToken)
    }
}

@Suite struct NotificationTests {
    let small = try! Payload(json: #"{"aps":{"alert":"hi"}}"#)

    @Test func addsThePushTypesTopicSuffixOnce() throws {
        #expect(try Notification(topic: "com.a.b", pushType: .voip, payload: small).topic == "com.a.b.voip")
        #expect(try Notification(topic: "com.a.b.voip", pushType: .voip, payload: small).topic == "com.a.b.voip")
        #expect(try Notification(topic: "com.a.b", pushType: .liveactivity, payload: small).topic
            == "com.a.b.push-type.liveactivity")
        #expect(try Notification(topic: "com.a.b", payload: small).topic == "com.a.b")
        #expect(try Notification(topic: "com.a.b", pushType: .accessory, payload: small).topic
            == "com.a.b.push-type.accessory")
        #expect(try Notification(topic: "com.a.b", pushType: .widgets, payload: WidgetsPush.payload).topic
            == "com.a.b.push-type.widgets")
    }

    /// A widgets push carries `{"aps":{"content-changed":true}}`, white space aside, and nothing else.
    @Test func aWidgetsPushHasOnePayload() throws {
        #expect(WidgetsPush.payload.bytes == Array(#"{"aps":{"content-changed":true}}"#.utf8))
        try WidgetsPush.check(Payload(json: " { \"aps\" : { \"content-changed\" : true } } "))
        for other in [#"{"aps":{"content-changed":false}}"#, #"{"aps":{"alert":"hi"}}"#,
                      #"{"aps":{"content-changed":true},"x":1}"#] {
            #expect(throws: WidgetsPush.Error.notContentChanged) { try WidgetsPush.check(Payload(json: other)) }
        }
    }

    /// "apns-priority: 10 (immediate), 5 (power-considerate; required for background)".
    @Test func backgroundPushesGetPriorityFiveAndRefuseTen() throws {
        #expect(try Notification(topic: "t", pushType: .background, payload: small).priority == .powerConsiderate)
        #expect(throws: Notification.Error.priorityNotAllowed(.immediate, .background)) {
            try Notification(topic: "t", pushType: .background, priority: .immediate, payload: small)
        }
        #expect(try Notification(topic: "t", payload: small).priority == nil)
    }

    /// "Payload: a JSON object, at most 4096 bytes (5120 for voip)."
    @Test func payloadLimitsDependOnThePushType() throws {
        func payload(_ size: Int) throws -> Payload {
            let filler = String(repeating: "x", count: size - #"{"aps":{},"f":""}"#.utf8.count)
            return try Payload(json: #"{"aps":{},"f":"\#(filler)"}"#)
        }
        #expect(try payload(4096).count == 4096)
        _ = try Notification(topic: "t", payload: payload(4096))
        #expect(throws: Notification.Error.payloadTooLarge(size: 4097, limit: 4096, pushType: .alert)) {
            try Notification(topic: "t", payload: payload(4097))
        }
        _ = try Notification(topic: "t", pushType: .voip, payload: payload(5120))
        #expect(throws: Notification.Error.self) { try Notification(topic: "t", pushType: .voip, payload: payload(5121)) }
    }

    /// "apns-collapse-id: at most 64 bytes".
    @Test func collapseIDAndTopicChecks() {
        #expect(throws: Notification.Error.collapseIDTooLong(bytes: 65)) {
            try Notification(topic: "t", collapseID: String(repeating: "c", count: 65), payload: small)
        }
        #expect(throws: Notification.Error.missingTopic) { try Notification(topic: "  ", payload: small) }
    }

    /// The topic is trimmed of surrounding white space (Unicode's, not only ASCII's);
    /// one with none keeps its text.
    @Test(arguments: [
        ("com.example.app", "com.example.app"),
        (" com.example.app\t", "com.example.app"),
        ("\u{00A0}com.example.app\n", "com.example.app"),
        ("com.example.app\u{2003}", "com.example.app"),
        ("é.app", "é.app"),
    ])
    func topicIsTrimmedOfWhiteSpaceOnly(given: String, topic: String) throws {
        #expect(try Notification(topic: given, payload: small).topic == topic)
    }
}

@Suite struct RetryPolicyTests {
    @Test func backoffGrowsExponentiallyWithinJitterAndCap() {
        let policy = RetryPolicy(maxAttempts: 10, initialBackoff: .milliseconds(100), maxBackoff: .seconds(1), jitter: 0.5)
        var rng = SystemRandomNumberGenerator()
        for attempt in 1...8 {
            let full = min(Duration.milliseconds(100) * (1 << (attempt - 1)), .seconds(1))
            for _ in 0..<50 {
                let wait = policy.backoff(afterAttempt: attempt, using: &rng)
                #expect(wait <= full && wait >= full * 0.5, "attempt \(attempt): \(wait)")
            }
        }
    }
}

@Suite struct RequestRandomTests {
    /// Seeded per generator, and no visible bias: each bit position is set about
    /// half the time (10,000 draws: 5,000 ± 5 standard deviations of 50).
    @Test func generatorsDifferAndBitsAreBalanced() {
        var a = RequestRandom(), b = RequestRandom()
        #expect((0..<4).map { _ in a.next() } != (0..<4).map { _ in b.next() })
        var ones = [Int](repeating: 0, count: 64)
        var seen = Set<UInt64>()
        for _ in 0..<10_000 {
            let x = a.next()
            seen.insert(x)
            for bit in 0..<64 where x & (1 << UInt64(bit)) != 0 { ones[bit] += 1 }
        }
        #expect(seen.count == 10_000)
        #expect(ones.allSatisfy { (4750...5250).contains($0) }, "\(ones)")
    }
}

@Suite struct RandomUUIDTests {
    /// The apns-id writer against the plain rule: the two draws' 16 bytes in order,
    /// version 4 and the RFC 4122 variant set, two lower-case hex digits a byte (high
    /// nibble first), dashes after bytes 4, 6, 8 and 10, then a NUL.
    @Test func writesTheDrawsBytesAsACanonicalVersion4UUID() {
        var rng = RequestRandom()
        let out = UnsafeMutablePointer<CChar>.allocate(capacity: 40)
        defer { out.deallocate() }
        for _ in 0..<2_000 {
            var reference = rng   // the same state: the same two draws
            var bytes = withUnsafeBytes(of: ((reference.next() as UInt64).littleEndian,
                                             (reference.next() as UInt64).littleEndian)) { Array($0) }
            bytes[6] = (bytes[6] & 0x0F) | 0x40
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            var expected = ""
            for (i, b) in bytes.enumerated() {
                if [4, 6, 8, 10].contains(i) { expected += "-" }
                expected += String(b >> 4, radix: 16) + String(b & 0xF, radix: 16)
            }
            out.update(repeating: 0x7F, count: 40)
            writeRandomUUID(out, using: &rng)
            #expect(String(cString: out) == expected)
            #expect(out[36] == 0 && out[37] == 0x7F)   // exactly 36 characters and a NUL
        }
    }
}

@Suite struct MadeAPNsIDTests {
    /// A result keeps an apns-id a lane made as its two random words: read back,
    /// written for a record, compared and hashed, it is the text the request carried.
    @Test func aMadeIDReadsWritesComparesAndHashesAsItsText() {
        var rng = RequestRandom()
        let out = UnsafeMutablePointer<CChar>.allocate(capacity: 40)
        defer { out.deallocate() }
        for _ in 0..<200 {
            let (first, second) = randomUUIDWords(using: &rng)
            writeUUID(UnsafeMutableRawPointer(out), first, second)
            out[uuidLength] = 0
            let text = String(cString: out)
            let made = DeliveryResult(token: "ab", id: .random(first, second), uniqueID: nil, status: 200, reason: nil,
                                      timestamp: nil, attempts: 1, latency: .zero, error: nil)
            let given = DeliveryResult(token: "ab", apnsID: text, status: 200, reason: nil, attempts: 1)
            #expect(made.apnsID == text)
            #expect(made == given && made.hashValue == given.hashValue)
            var written = "", plain = false
            #expect(made.withAPNsIDUTF8 { bytes, p in
                written = String(decoding: bytes, as: UTF8.self)
                plain = p
            })
            #expect(written == text && plain && made.apnsIDUTF8Count == uuidLength)
            #expect(made.tokenIsPlain && !given.tokenIsPlain)
        }
        let none = DeliveryResult(token: "ab", apnsID: nil, status: 410, reason: .unregistered, timestamp: 1, attempts: 1)
        #expect(none.apnsID == nil && none.timestamp == 1 && !none.withAPNsIDUTF8 { _, _ in })
        #expect(DeliveryResult(token: "ab", apnsID: nil, status: 0, reason: nil, attempts: 0).timestamp == nil)
    }
}
