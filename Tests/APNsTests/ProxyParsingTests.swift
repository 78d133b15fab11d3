import Testing
@testable import APNs

/// `Proxy(url:)`, `Proxy.fromEnvironment` and `NoProxy`, without a network.
@Suite struct ProxyParsingTests {
    // MARK: - URLs

    @Test func hostAndPort() throws {
        let p = try Proxy(url: "http://proxy.corp.example:3128")
        #expect(p.host == "proxy.corp.example" && p.port == 3128 && p.username == nil && p.password == nil)
    }

    @Test func aSchemelessURLIsHTTPAsCurlTakesIt() throws {
        let p = try Proxy(url: "10.0.0.1:8080/")
        #expect(p.host == "10.0.0.1" && p.port == 8080)
    }

    @Test func theSchemeIsCaseInsensitiveAndATrailingSlashIsFine() throws {
        #expect(try Proxy(url: "HTTP://h:1/").host == "h")
    }

    @Test func credentialsArePercentDecoded() throws {
        let p = try Proxy(url: "http://us%40er:p%3Ass%20w%C3%B6rd@h:1")
        #expect(p.username == "us@er" && p.password == "p:ss wörd")
    }

    @Test func anAtInThePasswordIsTheLastOneThatCounts() throws {
        let p = try Proxy(url: "http://u:p@ss@h:1")
        #expect(p.username == "u" && p.password == "p@ss" && p.host == "h")
    }

    @Test func aUserWithoutAPasswordHasAnEmptyOne() throws {
        let p = try Proxy(url: "http://u@h:1")
        #expect(p.username == "u" && p.password == "")
    }

    @Test func bracketedIPv6() throws {
        let p = try Proxy(url: "http://[::1]:8888")
        #expect(p.host == "::1" && p.port == 8888)
        #expect(p.description == "http://[::1]:8888")
    }

    @Test(arguments: [
        ("https://h:1", "https:// proxies are not supported"),
        ("socks5://h:1080", "SOCKS proxies are not supported"),
        ("socks4a://h:1080", "SOCKS proxies are not supported"),
        ("ftp://h:21", "unsupported scheme 'ftp'"),
        ("http://h", "no port"),
        ("http://h:", "port '' is not 1 to 65535"),
        ("http://h:0", "port '0' is not 1 to 65535"),
        ("http://h:65536", "port '65536' is not 1 to 65535"),
        ("http://h:+80", "port '+80' is not 1 to 65535"),
        ("http://:80", "no host"),
        ("http://h:80/x", "no path, query or fragment"),
        ("http://h:80?q", "no path, query or fragment"),
        ("http://u:%zz@h:80", "bad percent-encoding"),
        ("http://u%3Ax:p@h:80", "cannot contain ':'"),
        ("http://u:a%0D%0AX-Evil:%201@h:80", "control character"),
        ("http://h\r\nX: y:80", "control character"),
        ("http://h h:80", "is not a host name"),
        ("http://[::1:80", "unclosed '['"),
        ("http://[nothex]:80", "is not an IPv6 address"),
        ("http://@h:80", "empty user name"),
    ])
    func badURLsAreRefusedWithAReason(url: String, why: String) {
        #expect {
            _ = try Proxy(url: url)
        } throws: { error in
            "\(error)".contains(why)
        }
    }

    // MARK: - The password never shows

    @Test func thePasswordIsRedactedEverywhere() throws {
        let p = try Proxy(url: "http://bob:hunter2@h:3128")
        #expect(p.description == "http://bob:***@h:3128")
        #expect(!String(reflecting: p).contains("hunter2"))
        var dumped = ""
        dump(p, to: &dumped)
        #expect(!dumped.contains("hunter2") && dumped.contains("***"))
        var configurationDump = ""
        dump(Optional(p), to: &configurationDump)
        #expect(!configurationDump.contains("hunter2"))
    }

    @Test(arguments: ["https://bob:hunter2@h:3128", "http://bob:hunter2@h", "socks5://bob:hunter2@h:1",
                      "http://bob:hunter2@h:1/path", "bob:hunter2@h"])
    func errorsNeverEchoThePassword(url: String) {
        #expect {
            _ = try Proxy(url: url)
        } throws: { error in
            let text = "\(error)"
            return !text.contains("hunter2") && text.contains("bob:***@")
        }
    }

    // MARK: - The environment

    @Test func lowerCaseFirstThenUpperCaseAsCurlReadsThem() throws {
        let both = try Proxy.fromEnvironment(["https_proxy": "http://a:1", "HTTPS_PROXY": "http://b:2"])
        #expect(both?.host == "a")
        let upper = try Proxy.fromEnvironment(["https_proxy": "", "HTTPS_PROXY": "http://b:2"])
        #expect(upper?.host == "b", "an empty value counts as unset")
        #expect(try Proxy.fromEnvironment(["http_proxy": "http://c:3"]) == nil, "http_proxy is for plain HTTP, not APNs")
        #expect(try Proxy.fromEnvironment([:]) == nil)
    }

    @Test func noProxyComesWithIt() throws {
        let p = try #require(try Proxy.fromEnvironment(["HTTPS_PROXY": "http://p:1", "NO_PROXY": "localhost,.corp"]))
        #expect(!p.applies(to: Endpoint(host: "localhost", port: 443)))
        #expect(!p.applies(to: Endpoint(host: "push.corp", port: 443)))
        #expect(p.applies(to: Endpoint(host: "api.push.apple.com", port: 443)))
        let lower = try #require(try Proxy.fromEnvironment(["HTTPS_PROXY": "http://p:1", "no_proxy": "*", "NO_PROXY": ""]))
        #expect(!lower.applies(to: Endpoint(host: "api.push.apple.com", port: 443)))
    }

    @Test func aBadEnvironmentProxyIsAnError() {
        #expect(throws: Proxy.Error.self) { try Proxy.fromEnvironment(["HTTPS_PROXY": "socks5://p:1"]) }
    }

    // MARK: - NO_PROXY

    @Test func starBypassesEverything() {
        #expect(NoProxy("*").matches(host: "api.push.apple.com", port: 443))
        #expect(!NoProxy("").matches(host: "api.push.apple.com", port: 443))
    }

    @Test func aDomainMatchesItselfAndItsSubdomainsOnly() {
        for list in ["apple.com", ".apple.com", "APPLE.COM.", " foo , apple.com"] {
            let n = NoProxy(list)
            #expect(n.matches(host: "apple.com", port: 443), "\(list)")
            #expect(n.matches(host: "api.push.apple.com", port: 443), "\(list)")
            #expect(n.matches(host: "API.Push.Apple.com.", port: 443), "\(list)")
            #expect(!n.matches(host: "notapple.com", port: 443), "\(list)")
            #expect(!n.matches(host: "apple.com.evil.example", port: 443), "\(list)")
        }
    }

    @Test func hostPortEntriesMatchThatPortOnly() {
        let n = NoProxy("api.push.apple.com:2197,[::1]:8443")
        #expect(n.matches(host: "api.push.apple.com", port: 2197))
        #expect(!n.matches(host: "api.push.apple.com", port: 443))
        #expect(n.matches(host: "::1", port: 8443))
        #expect(!n.matches(host: "::1", port: 443))
    }

    @Test func addressesAndNetworks() {
        let n = NoProxy("127.0.0.1,10.0.0.0/8,::1,fd00::/8")
        #expect(n.matches(host: "127.0.0.1", port: 1))
        #expect(!n.matches(host: "127.0.0.2", port: 1))
        #expect(n.matches(host: "10.200.3.4", port: 1))
        #expect(!n.matches(host: "11.0.0.1", port: 1))
        #expect(n.matches(host: "::1", port: 1))
        #expect(n.matches(host: "[::1]", port: 1))
        #expect(n.matches(host: "fd12:3456::1", port: 1))
        #expect(!n.matches(host: "fe80::1", port: 1))
        #expect(!NoProxy("10.0.0.0/33").matches(host: "10.0.0.1", port: 1), "a mask longer than the address matches nothing")
    }
}
