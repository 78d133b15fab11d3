import Foundation
import Testing

/// What a client without credentials can do to the API's connections, against the
/// real binary: answers decided before the body is read end the connection instead
/// of draining a body nobody reads; a request has an absolute deadline however it
/// trickles; one address holds a bounded share of the connections; a request the
/// HTTP parser refuses gets the API's JSON error. Closure is observed as an event
/// (the read returns 0, or a reset); the waits are hang guards, not bounds.
@Suite(.serialized) struct ConnectionGuardTests {
    /// A 2-second request deadline keeps these tests short.
    static func server(_ extra: String = "", requestTimeout: Int = 2) -> ServerProcess {
        var options = ServerProcess.Options()
        options.extraTopLevel = "request_timeout_seconds: \(requestTimeout)\n" + extra
        return ServerProcess(sandbox: nil, production: nil, options: options)
    }

    static let hangGuard: Duration = .seconds(60)

    /// A 401 (no credentials) and a 413 (a Content-Length over the limit) are decided
    /// from the head: each says `Connection: close`, and the connection ends while
    /// the client is still sending, not when a 100 MB body has trickled in.
    @Test func anEarlyAnswerClosesTheConnectionInsteadOfDrainingTheBody() async throws {
        // A deadline far away: what closes the connection here is the early answer.
        let server = Self.server(requestTimeout: 600)
        try await server.start()
        defer { Task { await server.stop() } }
        let heads = [
            (401, "POST /v1/notifications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"),
            (413, "POST /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Harness.apiKey)\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n"),
        ]
        for (status, head) in heads {
            let outcome = await RawSocket.onThread { () -> (HTTPResponse?, Bool) in
                guard let socket = RawSocket(port: server.port) else { return (nil, false) }
                socket.send(head + "{")
                let response = socket.awaitResponse(guardTime: Self.hangGuard)
                // Keep sending, as a client with a large body (or a trickler) does.
                let end = ContinuousClock.now + Self.hangGuard
                while !socket.closed && ContinuousClock.now < end {
                    socket.send("x")
                    socket.poll(timeout: .milliseconds(100))
                }
                return (response, socket.closed)
            }
            let response = try #require(outcome.0, "no answer to \(status)")
            #expect(response.status == status)
            #expect(response.json["success"] as? Bool == false && response.json["error"] is String, "\(response.body)")
            #expect(response.headers.contains { $0.0 == "connection" && $0.1 == "close" }, "\(response.headers)")
            #expect(outcome.1, "the connection of the \(status) ended while the client was still sending")
        }
        #expect(await server.request("GET", "/health").status == 200)
    }

    /// A head that never ends, and a body trickled a byte at a time with valid
    /// credentials: each is cut off at the request deadline (2 s here), however
    /// steadily the bytes come (each would reset an idle timer). The idle timeout is
    /// 10 minutes, so that only the deadline can end them within the hang guard.
    @Test func aRequestMustArriveWithinItsDeadlineHoweverItTrickles() async throws {
        let server = Self.server("idle_timeout_seconds: 600")
        try await server.start()
        defer { Task { await server.stop() } }
        let starts = [
            "POST /v1/notifications HTTP/1.1\r\nHost: x\r\n",
            "POST /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Harness.apiKey)\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{",
        ]
        for start in starts {
            let closed = await RawSocket.onThread { () -> Bool in
                guard let socket = RawSocket(port: server.port) else { return false }
                socket.send(start)
                let end = ContinuousClock.now + Self.hangGuard
                while !socket.closed && ContinuousClock.now < end {
                    socket.send(start.hasSuffix("{") ? " " : "X-Slow: 1\r\n")
                    socket.poll(timeout: .milliseconds(100))
                }
                return socket.closed
            }
            #expect(closed, "cut off: \(start.prefix(40))")
        }
    }

    /// The deadline is per request: a keep-alive connection idle between requests
    /// for longer than it is not closed by it (the idle timeout covers that).
    @Test func anIdleKeepAliveConnectionOutlivesTheRequestDeadline() async throws {
        let server = Self.server()
        try await server.start()
        defer { Task { await server.stop() } }
        let statuses = await RawSocket.onThread { () -> [Int] in
            guard let socket = RawSocket(port: server.port) else { return [] }
            var statuses: [Int] = []
            for round in 0..<2 {
                if round == 1 { Thread.sleep(forTimeInterval: 3) }  // past the 2 s deadline
                socket.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                guard let r = socket.awaitResponse(guardTime: Self.hangGuard) else { break }
                statuses.append(r.status)
                socket.clearReceived()
            }
            return statuses
        }
        #expect(statuses == [200, 200])
    }

    /// One address holds at most `max_connections_per_address`: one more is closed
    /// at once, those admitted still answer, and a slot freed is taken again. (The
    /// idle timeout is 10 minutes: no idle connection is closed for being idle here.)
    @Test func connectionsPerAddressAreCapped() async throws {
        let server = Self.server("max_connections_per_address: 5\nidle_timeout_seconds: 600")
        try await server.start()
        defer { Task { await server.stop() } }
        let port = server.port
        let outcome = await RawSocket.onThread { () -> (extraClosed: Bool, admittedAnswer: Int, afterFree: Int) in
            var admitted: [RawSocket] = []
            for _ in 0..<5 {
                guard let s = RawSocket(port: port) else { return (false, 0, 0) }
                admitted.append(s)
            }
            // The server admits in order; make sure all five are in before the sixth.
            for s in admitted {
                s.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
                _ = s.awaitResponse(guardTime: Self.hangGuard)
                s.clearReceived()
            }
            guard let extra = RawSocket(port: port) else { return (false, 0, 0) }
            let extraClosed = extra.awaitClose(guardTime: Self.hangGuard)
            admitted[0].send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            let answer = admitted[0].awaitResponse(guardTime: Self.hangGuard)?.status ?? 0
            // Free one slot: a new connection is served again.
            admitted.removeLast()
            var afterFree = 0
            let end = ContinuousClock.now + Self.hangGuard
            while afterFree != 200 && ContinuousClock.now < end {
                guard let next = RawSocket(port: port) else { break }
                next.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                afterFree = next.awaitResponse(guardTime: .seconds(5))?.status ?? 0
            }
            return (extraClosed, answer, afterFree)
        }
        #expect(outcome.extraClosed, "the sixth connection from 127.0.0.1 was closed")
        #expect(outcome.admittedAnswer == 200)
        #expect(outcome.afterFree == 200)
    }

    /// A request the HTTP parser refuses gets the API's error shape, then the end of the stream.
    @Test func aMalformedRequestGetsTheJSONErrorShape() async throws {
        let server = Self.server()
        try await server.start()
        defer { Task { await server.stop() } }
        let outcome = await RawSocket.onThread { () -> (HTTPResponse?, Bool) in
            guard let socket = RawSocket(port: server.port) else { return (nil, false) }
            socket.send("GET /health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n")
            let response = socket.awaitResponse(guardTime: Self.hangGuard)
            return (response, socket.awaitClose(guardTime: Self.hangGuard))
        }
        let response = try #require(outcome.0)
        #expect(response.status == 400)
        #expect(response.body == #"{"success":false,"error":"malformed HTTP request"}"#)
        #expect(response.headers.contains { $0.0 == "content-type" && $0.1.hasPrefix("application/json") })
        #expect(outcome.1, "closed after the 400")
    }

    /// 300 hostile sockets at once, more than the server's connection cap (256
    /// here): a third get a 401 for a 100 MB body and keep sending, a third a 413,
    /// a third trickle a head that never ends. `/health` keeps answering, and every
    /// one of them is closed.
    @Test func hundredsOfTricklingClientsNeverKeepHealthFromAnswering() async throws {
        let server = Self.server("max_connections: 256\nmax_connections_per_address: 1000")
        try await server.start()
        defer { Task { await server.stop() } }
        let port = server.port
        let heads = [
            "POST /v1/notifications HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{",
            "POST /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(Harness.apiKey)\r\nContent-Length: 100000000\r\n\r\n{",
            "POST /v1/notifications HTTP/1.1\r\nHost: x\r\n",
        ]
        let count = 300
        let done = SharedCount()
        async let closedAll: [Bool] = withTaskGroup(of: Bool.self) { group in
            for i in 0..<count {
                group.addTask {
                    await RawSocket.onThread { () -> Bool in
                        defer { done.increment() }
                        guard let socket = RawSocket(port: port) else { return true }  // refused: not held either
                        socket.send(heads[i % 3])
                        let end = ContinuousClock.now + Self.hangGuard
                        while !socket.closed && ContinuousClock.now < end {
                            socket.send(i % 3 == 2 ? "X-Slow: 1\r\n" : "x")
                            socket.poll(timeout: .milliseconds(200))
                        }
                        return socket.closed
                    }
                }
            }
            var all: [Bool] = []
            for await closed in group { all.append(closed) }
            return all
        }
        // While they trickle (and after), /health answers, each within the hang guard.
        var answered = 0
        while done.value < count || answered < 3 {
            let r = await RawSocket.onThread { () -> Int in
                guard let socket = RawSocket(port: port) else { return 0 }
                socket.send("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                return socket.awaitResponse(guardTime: Self.hangGuard)?.status ?? 0
            }
            #expect(r == 200, "/health answered while \(count - done.value) hostile sockets were open")
            if r != 200 { break }
            answered += 1
            try await Task.sleep(for: .milliseconds(200))
        }
        let closed = await closedAll
        #expect(closed.count == count && closed.allSatisfy { $0 }, "\(closed.filter { !$0 }.count) never closed")
    }
}

/// A count shared by threads.
final class SharedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    func increment() { lock.withLock { n += 1 } }
    var value: Int { lock.withLock { n } }
}
