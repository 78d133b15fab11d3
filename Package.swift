// swift-tools-version:6.0
import PackageDescription

// Layout: C holds the wire and the crypto (CAPNs, CAPNsMock), Swift holds policy
// and the API (APNs, APNsMock), executables are thin.

// The C targets' warnings, and their optimization in debug builds too (the tests drive
// the hot path and the mock hard), for work on this package only. SwiftPM refuses
// unsafe flags in a package that another one depends on by version, so a checkout of
// this one inside another's build (its `checkouts/` folder) goes without them; its
// release builds are optimized all the same.
let isDependency = Context.packageDirectory.split(separator: "/").contains("checkouts")
func cFlags(_ flags: [String]) -> [CSetting] { isDependency ? [] : [.unsafeFlags(flags)] }
// Debug binaries are linked with lld (it comes with the toolchain): the test bundle and
// apns-server are each some 200 MB of debug objects, which lld links in a fraction of the time.
let debugLinker: [LinkerSetting] = isDependency ? [] : [.unsafeFlags(["-use-ld=lld"], .when(configuration: .debug))]
let package = Package(
    name: "apns-engine",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "APNs", targets: ["APNs"]),
        .library(name: "APNsMock", targets: ["APNsMock"]),
        .executable(name: "apns-send", targets: ["apns-send"]),
        .executable(name: "apns-mock", targets: ["apns-mock"]),
        .executable(name: "apns-bench", targets: ["apns-bench"]),
        .executable(name: "apns-server", targets: ["apns-server"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        // apns-server: HTTP API, YAML config, Prometheus text.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // apns-server on PostgreSQL (several instances sharing one outbox).
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // apns-server's connection handlers (Hummingbird's own NIO dependencies).
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // apns-server's webhooks (HTTP/1.1 and HTTP/2 over TLS, with timeouts); already in
        // the graph through Hummingbird's test support.
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.30.0"),
    ],
    targets: [
        // The sender's hot path: ES256 provider tokens (OpenSSL) and HTTP/2 transports.
        .target(
            name: "CAPNs",
            cSettings: [.define("_GNU_SOURCE")] + cFlags(["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
            linkerSettings: [
                // libcurl is not linked: curl_api.c opens it when first needed.
                .linkedLibrary("nghttp2"),
                .linkedLibrary("ssl"), .linkedLibrary("crypto"), .linkedLibrary("pthread"),
            ] + debugLinker
        ),
        // Mock APNs server: libnghttp2 server API + OpenSSL + epoll.
        .target(
            name: "CAPNsMock",
            cSettings: [.define("_GNU_SOURCE")] + cFlags(["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"]),
            linkerSettings: [
                .linkedLibrary("nghttp2"), .linkedLibrary("ssl"), .linkedLibrary("crypto"),
                .linkedLibrary("pthread"),
            ] + debugLinker
        ),
        .target(
            name: "APNs",
            dependencies: [
                "CAPNs",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(name: "APNsMock", dependencies: ["CAPNsMock"]),
        // The version every binary's --version prints, and the git commit beside it (read
        // before each build by scripts/build-info.sh, through the plugin).
        .target(name: "CBuildInfo"),
        .plugin(name: "BuildCommitPlugin", capability: .buildTool()),
        .target(name: "BuildCommit", plugins: ["BuildCommitPlugin"]),
        // The console's page, script and style and the OpenAPI document, kept as files
        // and compiled into the Service target as text (no resource bundle to ship).
        .plugin(name: "EmbedAssetsPlugin", capability: .buildTool()),
        // apns-server's memory: registry, preferences, outbox, delivery log (SQLite, or PostgreSQL).
        .target(name: "Store", dependencies: [
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
            .product(name: "PostgresNIO", package: "postgres-nio"),
            // The pool's "no connection for a minute" error, matched by type.
            .product(name: "_ConnectionPoolModule", package: "postgres-nio"),
            .product(name: "Logging", package: "swift-log"),
        ]),
        // HS256 for the apps' user JWTs: OpenSSL's HMAC and CRYPTO_memcmp (libcrypto is linked already).
        .target(
            name: "CServiceCrypto",
            cSettings: cFlags(["-O2", "-Wall", "-Wextra"]),
            linkerSettings: [.linkedLibrary("crypto")]
        ),
        // apns-server in layers, each a target so that the compiler keeps the arrows
        // docs/ARCHITECTURE.md draws: HTTP -> Delivery <- Workers, all over Core, and the
        // app (Service) assembling them. Nothing below the app imports a layer beside it.
        //
        // Core: what every layer shares: the config as read, the clock, the log's time,
        // JSON, the metrics, and the values the config names (API keys, quiet hours,
        // batching rules).
        .target(
            name: "ServiceCore",
            dependencies: [
                "APNs", "Store", "CServiceCrypto", "CBuildInfo", "BuildCommit",
                .product(name: "Yams", package: "Yams"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // Delivery: the policy of a send, whoever asks for it: fan-out plans, registration,
        // schedules, holds, batching, Live Activities, broadcast channels, the APNs clients.
        .target(
            name: "ServiceDelivery",
            dependencies: [
                "ServiceCore", "APNs", "Store",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // Workers: the loops that do what is stored: the outbox, schedules, broadcasts,
        // webhooks, the pruner and the gauges.
        .target(
            name: "ServiceWorkers",
            dependencies: [
                "ServiceCore", "ServiceDelivery", "APNs", "Store",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ]
        ),
        // HTTP: the API's routes, auth, idempotency, errors, connection guards, the
        // console and the OpenAPI document (kept as files, compiled in as text).
        .target(
            name: "ServiceHTTP",
            dependencies: [
                "ServiceCore", "ServiceDelivery", "APNs", "Store", "CServiceCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["Console/console.html", "Console/console.js", "Console/console.css", "OpenAPI/openapi.json"],
            plugins: ["EmbedAssetsPlugin"]
        ),
        // The app: builds the router and the services from the config and runs them
        // (`buildApplication`), the process's entry points and `store copy`.
        .target(
            name: "Service",
            dependencies: [
                "ServiceCore", "ServiceDelivery", "ServiceWorkers", "ServiceHTTP", "APNs", "Store",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(name: "apns-server", dependencies: [
            "Service", "ServiceCore",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "Metrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
        ]),
        .executableTarget(
            name: "apns-send",
            dependencies: ["APNs", "CBuildInfo", "BuildCommit", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "apns-mock",
            dependencies: ["APNsMock", "CBuildInfo", "BuildCommit", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),
        .executableTarget(
            name: "apns-bench",
            dependencies: [
                "APNs", "APNsMock",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Shared by the test targets: throw-away PKI, locating built binaries, running subprocesses.
        .target(name: "TestSupport", dependencies: ["APNs", "APNsMock"], path: "Tests/TestSupport"),
        .testTarget(name: "CAPNsTests", dependencies: ["CAPNs", "CAPNsMock", "TestSupport"]),
        .testTarget(name: "APNsMockTests", dependencies: ["APNsMock", "CAPNs", "TestSupport"]),
        .testTarget(name: "APNsTests", dependencies: [
            "APNs", "APNsMock", "TestSupport",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ]),
        .testTarget(name: "CLITests", dependencies: ["APNsMock", "TestSupport"]),
        // apns-send's own parts (token memory, resumed records), tested in-process.
        .testTarget(name: "SendToolTests", dependencies: ["apns-send", "APNs", "TestSupport"]),
        .testTarget(name: "BenchTests", dependencies: ["TestSupport"]),
        // apns-server: its HTTP contract in process (HummingbirdTesting), and as a process where
        // one is the point (signals, kill -9, exit codes, several instances); a real mock over TLS.
        .testTarget(name: "ServerTests", dependencies: [
            "APNsMock", "CServiceCrypto", "Service", "ServiceCore", "ServiceDelivery", "ServiceWorkers", "ServiceHTTP",
            "Store", "TestSupport",
            .product(name: "HummingbirdTesting", package: "hummingbird"),
        ]),
        .testTarget(name: "StoreTests", dependencies: ["Store", "TestSupport"]),
    ]
)

// scripts/sanitize.sh checks the C shim, the mock and the engine under AddressSanitizer:
// with APNS_CORE_ONLY set, the manifest holds only those and their tests, so that its
// sanitized build does not compile the service's dependencies (NIO, BoringSSL, SQLite,
// PostgreSQL), which it never runs. scripts/docs.sh builds the libraries for their DocC
// catalogs on the same smaller manifest.

if Context.environment["APNS_CORE_ONLY"] != nil {
    let core: Set<String> = ["CAPNs", "CAPNsMock", "CBuildInfo", "BuildCommit", "BuildCommitPlugin", "APNs", "APNsMock", "apns-send", "apns-mock",
                             "TestSupport", "CAPNsTests", "APNsMockTests", "APNsTests"]
    let coreDependencies = ["swift-log", "swift-metrics", "swift-service-lifecycle", "swift-argument-parser"]
    package.targets.removeAll { !core.contains($0.name) }
    package.products.removeAll { !core.contains($0.name) }
    package.dependencies.removeAll { dependency in
        guard case .sourceControl(_, let location, _) = dependency.kind else { return false }
        return !coreDependencies.contains { location.hasSuffix("/" + $0) }
    }
}
