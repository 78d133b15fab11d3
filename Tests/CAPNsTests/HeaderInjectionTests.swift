import CAPNs
import CAPNsMock
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Caller-supplied header values go into headers as they are, so the C API refuses
/// control characters itself: a CR LF in a collapse-id or topic must not become a
/// header of its own ("x-injected", a second apns-priority) on any hop.
@Suite struct HeaderInjectionTests {
    @Test("capns_header_value_ok refuses every control character and DEL, nothing else")
    func valueCheck() {
        #expect(capns_header_value_ok("com.example.app") == 1)
        #expect(capns_header_value_ok("") == 1)
        #expect(capns_header_value_ok("caf\u{e9} \u{7e}") == 1)      // UTF-8 and '~' pass
        for byte in Array(0x01...0x1f) + [0x7f] {
            let s = "a" + String(UnicodeScalar(UInt8(byte))) + "b"
            #expect(capns_header_value_ok(s) == 0, "byte \(byte)")
        }
    }

    /// The check takes 8 bytes a step and the rest one by one: a refused byte is found
    /// wherever it sits (every lane of a word, and the tail), next to the allowed bytes
    /// nearest to it, and a string of allowed bytes passes whatever its length.
    @Test func valueCheckFindsARefusedByteAtEveryPlace() {
        let refused: [UInt8] = Array(0x01...0x1f) + [0x7f]
        let allowed: [UInt8] = [0x20, 0x21, 0x7e, 0x80, 0x9f, 0xff, UInt8(ascii: "a")]
        for length in 1...24 {
            for fill in allowed {
                var bytes = [UInt8](repeating: fill, count: length)
                #expect(bytes.withCString(capns_header_value_ok) == 1, "\(bytes)")
                for at in 0..<length {
                    for byte in refused {
                        bytes[at] = byte
                        #expect(bytes.withCString(capns_header_value_ok) == 0, "\(bytes)")
                    }
                    bytes[at] = fill
                }
            }
        }
    }

    static func create(topic: String = TestPKI.shared.topic, pushType: String? = "alert",
                       collapseID: String? = nil) -> (OpaquePointer?, Int32) {
        let payload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)
        return payload.withUnsafeBufferPointer { body in
            topic.withCString { topic in
                withOptionalCString(pushType) { pushType in
                    withOptionalCString(collapseID) { collapse in
                        var spec = capns_message_spec()
                        spec.topic = topic
                        spec.push_type = pushType
                        spec.priority = 10
                        spec.expiration = -1
                        spec.collapse_id = collapse
                        spec.payload = body.baseAddress
                        spec.payload_len = body.count
                        errno = 0
                        let m = capns_message_create(&spec)
                        return (m, errno)
                    }
                }
            }
        }
    }

    @Test("A collapse-id, topic or push type with CR LF is refused by capns_message_create (EINVAL)",
          arguments: [
            (TestPKI.shared.topic, "alert", "abc\r\nx-injected: yes"),
            (TestPKI.shared.topic + "\r\napns-priority: 5", "alert", nil),
            (TestPKI.shared.topic, "alert\r\nx-injected: yes", nil),
            (TestPKI.shared.topic, "alert", "tab\tinside"),
          ] as [(String, String, String?)])
    func messageRefused(topic: String, pushType: String, collapseID: String?) {
        let (m, err) = Self.create(topic: topic, pushType: pushType, collapseID: collapseID)
        #expect(m == nil)
        #expect(err == EINVAL)
        capns_message_release(m)
    }

    @Test("Refused values reach no server: the mock sees only the valid request, without injected headers",
          arguments: Transport.allCases)
    func nothingReachesTheMock(transport: Transport) async throws {
        let mock = try InProcessMock { $0.record_cap = 100 }
        let (bad1, _) = Self.create(collapseID: "abc\r\nx-injected: yes")
        let (bad2, _) = Self.create(topic: TestPKI.shared.topic + "\r\napns-priority: 5")
        #expect(bad1 == nil && bad2 == nil)
        capns_message_release(bad1)
        capns_message_release(bad2)

        let sender = try TestSender(transport, mock: mock)
        // An authorization with CR LF is refused too, and the good token stays in use.
        #expect(sender.setAuthorization("x.y.z\r\nx-injected: yes") == -1)
        // A request whose apns-id carries CR LF is not taken (errno EINVAL).
        let (taken, err) = sender.submitRaw(tag: 0, token: TestSender.token(0),
                                            apnsID: "00000000-0000-4000-8000-\r\nx-inj: y")
        #expect(taken == 0 && err == EINVAL)
        await sender.submit(tags: 1..<2)
        await sender.collector.wait(for: 1, seconds: 20)
        await sender.destroy()
        let names = mock.recordedHeaderNames()
        let stats = await mock.stop()

        #expect(sender.collector.completions.map(\.tag) == [1])
        #expect(sender.collector.completions.first?.status == 200)
        #expect(stats.requests == 1)
        #expect(!names.isEmpty && names.allSatisfy { !$0.hasPrefix("x-inj") })
        #expect(names.filter { $0 == "apns-priority" }.count == 1)
    }
}

extension Array where Element == UInt8 {
    /// The bytes and a NUL, as the C string a caller would pass.
    fileprivate func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        (self + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) } }
    }
}
