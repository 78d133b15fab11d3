// swift-tools-version:6.0
import PackageDescription

// The measurement behind apns-server's webhook client (BENCHMARKS.md, "Webhook client"):
// the same webhook-shaped POSTs from AsyncHTTPClient and from Foundation's URLSession.
// A package of its own, so that the service's build and make test never compile it.
let package = Package(
    name: "webhook-clients",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.30.0"),
    ],
    targets: [
        .executableTarget(name: "webhook-client-bench", dependencies: [
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
        ]),
    ]
)
