import APNsMock
import Foundation
import Testing
import TestSupport

/// apns-send through a real HTTP proxy (tinyproxy on loopback): `--proxy`, the
/// APNS_PROXY setting, https_proxy/HTTPS_PROXY and NO_PROXY from the environment, and
/// refusals that end every token with a status-0 record naming the proxy.
@Suite struct ProxyCLITests {
    @Test(arguments: ["nghttp2", "curl"])
    func proxyFlagWithCredentialsDeliversThroughTheProxy(transport: String) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let proxy = try Tinyproxy(connectPorts: [mock.port], basicAuth: ("apns", "s3cret"))
        defer { proxy.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(20)
        let r = await CLI.run(CLI.arguments(mock) + ["--transport", transport,
                              "--proxy", "http://apns:s3cret@127.0.0.1:\(proxy.port)",
                              CLI.payload, scratch.file("t.txt", tokens.joined(separator: "\n"))])
        #expect(r.status == 0, "\(r.stderr)")
        let records = try Record.parse(r.stdout)
        #expect(records.count == tokens.count && records.allSatisfy { $0.status == 200 })
        #expect(proxy.connectRequests.contains("CONNECT 127.0.0.1:\(mock.port) HTTP/1.1"), "\(proxy.log)")
        #expect(UInt64(proxy.connectRequests.count) == mock.statistics().connectionsAccepted)
        #expect(!r.stderr.contains("s3cret") && !r.stdout.contains("s3cret"))
    }

    /// Without --proxy: https_proxy (or HTTPS_PROXY), as curl reads it.
    @Test(arguments: ["https_proxy", "HTTPS_PROXY"])
    func theEnvironmentsProxyIsUsed(variable: String) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let scratch = Scratch()
        let r = await CLI.run(CLI.arguments(mock) + [CLI.payload, scratch.file("t.txt", CLI.tokens(5).joined(separator: "\n"))],
                              environment: [variable: "http://127.0.0.1:\(proxy.port)"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try Record.parse(r.stdout).allSatisfy { $0.status == 200 })
        #expect(!proxy.connectRequests.isEmpty, "\(proxy.log)")
    }

    /// APNS_PROXY in a --config file, like the other settings.
    @Test func theConfigFilesProxyIsUsed() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let proxy = try Tinyproxy(connectPorts: [mock.port])
        defer { proxy.stop() }
        let scratch = Scratch()
        let config = scratch.file("apns.env", "APNS_PROXY=\"http://127.0.0.1:\(proxy.port)\"\n")
        let r = await CLI.run(CLI.arguments(mock) + ["--config", config, CLI.payload,
                                                     scratch.file("t.txt", CLI.tokens(3).joined(separator: "\n"))])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!proxy.connectRequests.isEmpty, "\(proxy.log)")
    }

    /// NO_PROXY names the endpoint: the (dead) proxy is never tried. Without it, the
    /// same run gets a status-0 record per token naming that proxy.
    @Test func noProxyBypassesTheEnvironmentsProxy() async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let dead = ClosedPort()
        defer { withExtendedLifetime(dead) {} }
        let scratch = Scratch()
        let tokens = CLI.tokens(5)
        let input = [CLI.payload, scratch.file("t.txt", tokens.joined(separator: "\n"))]
        let viaProxy = ["HTTPS_PROXY": "http://127.0.0.1:\(dead.port)"]

        let bypassed = await CLI.run(CLI.arguments(mock) + input,
                                     environment: viaProxy.merging(["NO_PROXY": "localhost,127.0.0.1"]) { $1 })
        #expect(bypassed.status == 0, "\(bypassed.stderr)")
        #expect(try Record.parse(bypassed.stdout).allSatisfy { $0.status == 200 })

        let proxied = await CLI.run(CLI.arguments(mock) + ["--retries", "1"] + input,
                                    environment: viaProxy.merging(["NO_PROXY": "example.com"]) { $1 })
        #expect(proxied.status == 1)
        let records = try Record.parse(proxied.stdout)
        #expect(records.count == tokens.count)
        #expect(records.allSatisfy { $0.status == 0 && ($0.error ?? "").contains("proxy 127.0.0.1:\(dead.port)") },
                "\(records.map(\.line))")
        #expect(mock.statistics().requests == UInt64(tokens.count), "only the bypassed run reached the mock")
    }

    /// 407 from the proxy: every token a status-0 record with the proxy's answer, one
    /// stderr line saying the endpoint is unreachable and why, exit 1.
    @Test(arguments: ["nghttp2", "curl"])
    func aProxyAskingForCredentialsGivesEveryTokenARecord(transport: String) async throws {
        let mock = try CLI.mock()
        defer { mock.stop() }
        let proxy = try Tinyproxy(connectPorts: [mock.port], basicAuth: ("apns", "s3cret"))
        defer { proxy.stop() }
        let scratch = Scratch()
        let tokens = CLI.tokens(30)
        let r = await CLI.run(CLI.arguments(mock) + ["--transport", transport, "--retries", "1",
                              "--proxy", "http://127.0.0.1:\(proxy.port)",
                              CLI.payload, scratch.file("t.txt", (tokens + ["xyz"]).joined(separator: "\n"))])
        #expect(r.status == 1)
        let records = try Record.parse(r.stdout)
        #expect(records.count == tokens.count + 1)
        let refusal = "proxy 127.0.0.1:\(proxy.port) refused CONNECT: 407 Proxy Authentication Required"
        #expect(records.filter { $0.reason == nil }.allSatisfy { $0.status == 0 && ($0.error ?? "").hasSuffix(refusal) },
                "\(records.map(\.line))")
        let unreachable = CLI.lines(r.stderr).filter { $0.contains("unreachable") }
        #expect(unreachable.count == 1 && unreachable[0].hasSuffix(refusal), "\(r.stderr)")
        #expect(mock.statistics().connectionsAccepted == 0)
    }

    @Test(arguments: [
        ("socks5://127.0.0.1:1080", "SOCKS proxies are not supported"),
        ("https://bob:hunter2@127.0.0.1:3128", "https:// proxies are not supported"),
        ("http://bob:hunter2@127.0.0.1", "no port"),
        ("http://127.0.0.1:3128/path", "no path"),
    ])
    func aBadProxyURLIsOneLineAndExitTwo(url: String, why: String) async throws {
        let scratch = Scratch()
        let r = await CLI.run(["--topic", CLI.pki.topic] + CLI.credentials() + ["--proxy", url, CLI.payload,
                               scratch.file("t.txt", CLI.tokens(1)[0])])
        #expect(r.status == 2)
        let lines = CLI.lines(r.stderr)
        #expect(lines.count == 1 && lines[0].contains("--proxy") && lines[0].contains(why), "\(r.stderr)")
        #expect(!r.stderr.contains("hunter2"))
        #expect(r.stdout.isEmpty)
    }

    @Test func aBadProxyInTheEnvironmentIsOneLineAndExitTwo() async throws {
        let scratch = Scratch()
        let r = await CLI.run(["--topic", CLI.pki.topic] + CLI.credentials() + [CLI.payload, scratch.file("t.txt", CLI.tokens(1)[0])],
                              environment: ["HTTPS_PROXY": "socks5h://alice:hunter2@proxy.example:1080"])
        #expect(r.status == 2)
        let lines = CLI.lines(r.stderr)
        #expect(lines.count == 1 && lines[0].contains("https_proxy") && lines[0].contains("SOCKS"), "\(r.stderr)")
        #expect(!r.stderr.contains("hunter2"))
    }
}
