import CAPNs
import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A host whose first address refuses: the sender must go on to the next one.
///
/// The test machine's /etc/hosts maps localhost to 127.0.0.1 only, so this test process
/// carries its own getaddrinfo (below): "localhost" asked for a port registered here
/// resolves to ::1, where nothing listens (the mock binds 127.0.0.1), then 127.0.0.1.
/// ::1 refuses only after the non-blocking connect is under way (EINPROGRESS, then
/// ECONNREFUSED), so the second socket is made after the first was closed and gets
/// its file descriptor number: the case the nghttp2 transport used to miss.
/// The test certificate names localhost, so TLS verification stays on.
@Suite(.serialized) struct AddressFallbackTests {
    @Test("A refusing first address falls back to the next", arguments: Transport.allCases)
    func refusedFirstAddress(transport: Transport) async throws {
        let mock = try InProcessMock()
        FallbackResolver.shared.register(mock.port)
        defer { FallbackResolver.shared.unregister(mock.port) }
        // The timeouts are hang guards: ::1 refuses at once, and a TLS handshake under
        // AddressSanitizer on a loaded machine can take seconds.
        let sender = try TestSender(transport, host: "localhost", port: mock.port, connectTimeoutMs: 60_000,
                                    requestTimeoutMs: 120_000, topic: TestPKI.shared.topic,
                                    providerToken: try InProcessMock.providerToken())
        let (completions, stats) = await sender.run(count: 5, seconds: 180)
        let mockStats = await mock.stop()

        expectEachTagOnce(completions, 5)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 200 },
                "\(completions.map(\.error))")
        #expect(mockStats.requests == 5)
        #expect(stats.connections_opened == 1)
        // curl resolves localhost itself (::1 then 127.0.0.1, the same order); our
        // transport asks getaddrinfo, so the list above is what it walked.
        if transport == .nghttp2 {
            #expect(FallbackResolver.shared.lookups(mock.port) >= 1)
        }
    }

    /// With no connect timeout the old transport waited forever on the unwatched socket;
    /// now the request is answered inside its own deadline (long: a waiting socket never
    /// answers, however long the deadline, while a loaded machine is only slow).
    @Test("Without a connect timeout the fallback still happens (nghttp2)")
    func refusedFirstAddressNoConnectTimeout() async throws {
        let mock = try InProcessMock()
        FallbackResolver.shared.register(mock.port)
        defer { FallbackResolver.shared.unregister(mock.port) }
        let sender = try TestSender(.nghttp2, host: "localhost", port: mock.port, connectTimeoutMs: 0,
                                    requestTimeoutMs: 60_000, topic: TestPKI.shared.topic,
                                    providerToken: try InProcessMock.providerToken())
        let (completions, _) = await sender.run(count: 3, seconds: 120)
        _ = await mock.stop()

        expectEachTagOnce(completions, 3)
        #expect(completions.allSatisfy { $0.outcome == CAPNS_ANSWERED && $0.status == 200 },
                "\(completions.map(\.error))")
    }
}

/// Which "localhost" lookups the interposed getaddrinfo answers, by service (port).
final class FallbackResolver: @unchecked Sendable {
    static let shared = FallbackResolver()
    private let lock = NSLock()
    private var ports: [String: Int] = [:]     // service -> lookups answered

    func register(_ port: UInt16) { lock.withLock { ports[String(port)] = 0 } }
    func unregister(_ port: UInt16) { lock.withLock { _ = ports.removeValue(forKey: String(port)) } }
    func lookups(_ port: UInt16) -> Int { lock.withLock { ports[String(port)] ?? 0 } }

    /// True (and counted) when this lookup is one of ours.
    func claim(_ node: String, _ service: String) -> Bool {
        lock.withLock {
            guard node == "localhost", let n = ports[service] else { return false }
            ports[service] = n + 1
            return true
        }
    }
}

private typealias GetAddrInfo = @convention(c) (
    UnsafePointer<CChar>?, UnsafePointer<CChar>?, UnsafePointer<addrinfo>?,
    UnsafeMutablePointer<UnsafeMutablePointer<addrinfo>?>?
) -> Int32

/// The C library's getaddrinfo (RTLD_NEXT: the definition after this executable's).
private let realGetAddrInfo: GetAddrInfo = unsafeBitCast(
    dlsym(UnsafeMutableRawPointer(bitPattern: -1), "getaddrinfo")!, to: GetAddrInfo.self)

/// This process's getaddrinfo: the C code linked into the test executable (CAPNs) binds
/// to it at link time. Registered "localhost" lookups get [::1, 127.0.0.1], each list
/// node made by the real getaddrinfo, so freeaddrinfo frees them as usual.
@_cdecl("getaddrinfo")
public func fallbackGetAddrInfo(_ node: UnsafePointer<CChar>?, _ service: UnsafePointer<CChar>?,
                                _ hints: UnsafePointer<addrinfo>?,
                                _ res: UnsafeMutablePointer<UnsafeMutablePointer<addrinfo>?>?) -> Int32 {
    guard let node, let service, let res,
          FallbackResolver.shared.claim(String(cString: node), String(cString: service)) else {
        return realGetAddrInfo(node, service, hints, res)
    }
    var numeric = addrinfo()
    numeric.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
    numeric.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var v6: UnsafeMutablePointer<addrinfo>?
    var v4: UnsafeMutablePointer<addrinfo>?
    let rv6 = realGetAddrInfo("::1", service, &numeric, &v6)
    let rv4 = realGetAddrInfo("127.0.0.1", service, &numeric, &v4)
    guard rv6 == 0, rv4 == 0, let v6 else {
        if let v6 { freeaddrinfo(v6) }
        if let v4 { freeaddrinfo(v4) }
        return EAI_FAIL
    }
    var last = v6
    while let next = last.pointee.ai_next { last = next }
    last.pointee.ai_next = v4
    res.pointee = v6
    return 0
}
