// Webhook-shaped POSTs from one client library: N requests of a 0.5 KB JSON body, C at a
// time, to one local HTTP/1.1 receiver. Prints wall time, this process's CPU and peak RSS.
//   webhook-client-bench ahc|urlsession URL N C
import AsyncHTTPClient
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NIOCore

let args = CommandLine.arguments
let which = args[1], url = args[2], n = Int(args[3])!, c = Int(args[4])!
let body = Data(#"{"id":"evt_0123456789","type":"token.deactivated","data":{"token":"\#(String(repeating: "a", count: 128))","user_id":"staff-1","app_type":"staff","reason":"Unregistered","timestamp":"2026-11-26T18:00:00.000Z"},"padding":"\#(String(repeating: "p", count: 200))"}"#.utf8)

func usage() -> (cpu: Double, maxRSSKB: Int) {
    var u = rusage()
    getrusage(RUSAGE_SELF.rawValue, &u)
    let cpu = Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
    return (cpu, u.ru_maxrss)
}

let client = HTTPClient(eventLoopGroupProvider: .singleton)
let session = URLSession(configuration: .ephemeral)

func send() async throws {
    switch which {
    case "ahc":
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: .seconds(10))
        _ = try await response.body.collect(upTo: 1 << 16)
        guard response.status == .ok else { fatalError("status \(response.status)") }
    default:
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.timeoutInterval = 10
        let (_, response) = try await session.data(for: request)
        guard (response as? HTTPURLResponse)?.statusCode == 200 else { fatalError("status") }
    }
}

let before = usage()
let start = Date()
try await withThrowingTaskGroup(of: Void.self) { group in
    for worker in 0..<c {
        group.addTask {
            var i = worker
            while i < n { try await send(); i += c }
        }
    }
    try await group.waitForAll()
}
let wall = Date().timeIntervalSince(start)
let after = usage()
try await client.shutdown()
print("\(which) n=\(n) c=\(c) wall=\(String(format: "%.2f", wall))s rate=\(Int(Double(n) / wall))/s cpu=\(String(format: "%.2f", after.cpu - before.cpu))s cpu_per_1k=\(String(format: "%.1f", (after.cpu - before.cpu) / Double(n) * 1000 * 1000))ms rss=\(after.maxRSSKB / 1024)MB")
