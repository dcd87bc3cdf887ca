// swift-tools-version:6.1
import Foundation
import PackageDescription

/// Settings every target of ours shares (see shared/STYLE.md).
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

var products: [Product] = [
    .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
    .library(name: "SwitchboardProtocol", targets: ["SwitchboardProtocol"]),
    .library(name: "SwitchboardBus", targets: ["SwitchboardBus"]),
    .library(name: "SwitchboardBroker", targets: ["SwitchboardBroker"]),
    .library(name: "SwitchboardSecurity", targets: ["SwitchboardSecurity"]),
    .library(name: "SwitchboardObservability", targets: ["SwitchboardObservability"]),
    .executable(name: "switchboard", targets: ["switchboard"]),
    .executable(name: "switchboard-broker", targets: ["switchboard-broker"]),
    .executable(name: "switchboard-kiosk", targets: ["switchboard-kiosk"]),
    .library(name: "SwitchboardKiosk", targets: ["SwitchboardKiosk"]),
    .library(name: "SwitchboardDesk", targets: ["SwitchboardDesk"]),
    .executable(name: "switchboard-monitor", targets: ["switchboard-monitor"]),
    .library(name: "SwitchboardHTTP", targets: ["SwitchboardHTTP"]),
    .library(name: "SwitchboardCredentials", targets: ["SwitchboardCredentials"]),
    .library(name: "SwitchboardEmulators", targets: ["SwitchboardEmulators"]),
    .library(name: "SwitchboardBackends", targets: ["SwitchboardBackends"]),
    .library(name: "SwitchboardAuth", targets: ["SwitchboardAuth"]),
    .library(name: "SwitchboardTokens", targets: ["SwitchboardTokens"]),
    .executable(name: "switchboard-auth", targets: ["switchboard-auth"]),
    .executable(name: "switchboard-emulator", targets: ["switchboard-emulator"]),
    .library(name: "SwitchboardWorkers", targets: ["SwitchboardWorkers"]),
    .executable(name: "switchboard-filemaker", targets: ["switchboard-filemaker"]),
    .executable(name: "switchboard-eto", targets: ["switchboard-eto"]),
    .executable(name: "switchboard-directory", targets: ["switchboard-directory"]),
]

var targets: [Target] = [
    // libzmq through its header and `-lzmq`, both on the default paths of Debian's
    // libzmq3-dev. Not through `pkgConfig: "libzmq"`: Debian's libzmq.pc adds `-isystem`
    // flags (krb5, pgm, libxml2) that SwiftPM refuses and warns about on every build.
    .systemLibrary(
        name: "CZeroMQ",
        providers: [.apt(["libzmq3-dev"])]
    ),
    // A bound on what one peer can make libzmq buffer, counted as bytes arrive (its header says
    // how, and why libzmq's own options cannot).
    .target(name: "CReceiveGuard"),
    // The IOThread is a Service (ServiceLifecycle) that owns the context's teardown.
    .target(
        name: "ZeroMQ",
        dependencies: ["CZeroMQ", "CReceiveGuard", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
        swiftSettings: swiftSettings
    ),
    // posix_spawn's GNU file actions (chdir, closefrom) for ChildProcess.
    .target(name: "CSpawn"),
    // The allocator's heap statistics and trim (glibc's or jemalloc's), for the broker's HeapTrim.
    .target(name: "CMalloc"),
    // jemalloc (Debian's libjemalloc-dev), linked into the broker: its malloc serves the
    // broker's two busy threads, which allocate on one and free on the other, at less than
    // glibc's cost (bench/RESULTS.md, "Ingest: jemalloc in the broker").
    .systemLibrary(
        name: "CJemalloc",
        providers: [.apt(["libjemalloc-dev"])]
    ),
    .target(name: "SwitchboardProtocol", swiftSettings: swiftSettings),
    // Helpers for our own tests and benchmarks: protocol vectors, temporary directories,
    // child processes. Never linked into an executable.
    .target(
        name: "SwitchboardTesting",
        dependencies: [
            "CZeroMQ", "ZeroMQ", "SwitchboardProtocol", "SwitchboardBroker", "SwitchboardBus", "SwitchboardEmulators", "CSpawn",
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .target(
        name: "SwitchboardRuntime",
        dependencies: [
            "CSpawn",
            .product(name: "Configuration", package: "swift-configuration"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    // Metrics (swift-metrics into a Prometheus registry) and the admin HTTP server every
    // program runs: /metrics, /health/live, /health/ready.
    .target(
        name: "SwitchboardObservability",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardProtocol", "SwitchboardRuntime",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardObservabilityTests",
        dependencies: [
            "SwitchboardObservability", "SwitchboardTesting",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Prometheus", package: "swift-prometheus"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    // The one way our programs open a SQLite file that must survive a crash (journal, outboxes,
    // processed sets): private, WAL, synchronous=FULL checked.
    .target(
        name: "SwitchboardStorage",
        dependencies: [
            "SwitchboardRuntime", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
        ],
        swiftSettings: swiftSettings
    ),
    .target(
        name: "SwitchboardBroker",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "ZeroMQ", "SwitchboardProtocol", "SwitchboardRuntime", "SwitchboardSecurity", "SwitchboardStorage", "CMalloc",
            .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            .product(name: "DequeModule", package: "swift-collections"),
            .product(name: "HeapModule", package: "swift-collections"),
            .product(name: "CoreMetrics", package: "swift-metrics"),
            // The journal's second store (`PostgresJournalStore`), chosen by `journal.store`.
            .product(name: "PostgresNIO", package: "postgres-nio"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
        ],
        swiftSettings: swiftSettings
    ),
    .target(
        name: "SwitchboardSecurity",
        dependencies: [
            "ZeroMQ", "SwitchboardProtocol", "SwitchboardRuntime", .product(name: "Configuration", package: "swift-configuration"),
        ],
        swiftSettings: swiftSettings
    ),
    .target(
        name: "SwitchboardBus",
        dependencies: [
            "ZeroMQ", "SwitchboardProtocol", "SwitchboardRuntime", "SwitchboardStorage",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-broker",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardBroker", "SwitchboardBus", "SwitchboardRuntime", "ZeroMQ", "SwitchboardSecurity", "SwitchboardObservability",
            "CJemalloc",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    // The kiosk's logic: the check-in form, check-ins as outbox events, the all-or-nothing CSV
    // import, ETO look-ups, load generation, and the long-running kiosk as services of one
    // ServiceGroup.
    .target(
        name: "SwitchboardKiosk",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"), "SwitchboardSecurity",
            "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime", "SwitchboardObservability", "ZeroMQ",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardKioskTests",
        dependencies: [
            "SwitchboardRuntime", "SwitchboardSecurity",
            "SwitchboardKiosk", "SwitchboardBus", "SwitchboardBroker", "SwitchboardProtocol", "SwitchboardObservability",
            "SwitchboardTesting", "ZeroMQ",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    // The front desk (issue 27): the page, staff sign-in, the roster and the journey.
    .target(
        name: "SwitchboardDesk",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardKiosk", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime", "SwitchboardObservability",
            "SwitchboardStorage", "ZeroMQ",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "_CryptoExtras", package: "swift-crypto"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardDeskTests",
        dependencies: [
            "SwitchboardRuntime", "SwitchboardObservability", "SwitchboardSecurity",
            "SwitchboardDesk", "SwitchboardKiosk", "SwitchboardBus", "SwitchboardBroker", "SwitchboardProtocol", "SwitchboardTesting",
            "SwitchboardEmulators", "ZeroMQ",
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-kiosk",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardKiosk", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime", "ZeroMQ", "SwitchboardSecurity",
            "SwitchboardObservability", "SwitchboardStorage", "SwitchboardDesk",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    // A consumer-group member for the process tests; never shipped (no product).
    .executableTarget(
        name: "group-member",
        dependencies: [
            "SwitchboardBus", "SwitchboardProtocol", "ZeroMQ",
            .product(name: "Logging", package: "swift-log"),
        ],
        path: "Tests/Fixtures/group-member",
        swiftSettings: swiftSettings
    ),
    .target(
        name: "SwitchboardMonitor",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime", "ZeroMQ", "SwitchboardSecurity", "SwitchboardObservability",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardMonitorTests",
        dependencies: [
            "SwitchboardRuntime", "SwitchboardSecurity",
            "SwitchboardMonitor", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardObservability", "SwitchboardTesting", "ZeroMQ",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"), .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-monitor",
        dependencies: [
            "SwitchboardMonitor", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime", "ZeroMQ", "SwitchboardSecurity",
            "SwitchboardObservability",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardRuntime", "SwitchboardBus", "ZeroMQ", "SwitchboardSecurity", "SwitchboardProtocol", "SwitchboardEmulators",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    // Outgoing HTTP for every back-end client: AsyncHTTPClient underneath, typed requests,
    // retries, auth adapters, redaction.
    .target(
        name: "SwitchboardHTTP",
        dependencies: [
            "SwitchboardProtocol",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOFoundationCompat", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    // The credential cache each worker keeps: tokens in memory, optionally in an encrypted file.
    .target(
        name: "SwitchboardCredentials",
        dependencies: [
            "SwitchboardRuntime",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    // Clients for the four back ends, one folder each, on SwitchboardHTTP.
    .target(
        name: "SwitchboardBackends",
        dependencies: [
            "SwitchboardHTTP", "SwitchboardProtocol",
            .product(name: "Logging", package: "swift-log"),
        ],
        path: "Sources/Backends",
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardBackendsTests",
        dependencies: [
            "SwitchboardBackends", "SwitchboardHTTP", "SwitchboardEmulators", "SwitchboardTesting",
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    // The worker side of `auth`: token.get over the bus into the worker's credential cache, and
    // the back-end clients' credentials from it. Never the accounts or their passwords.
    .target(
        name: "SwitchboardTokens",
        dependencies: ["SwitchboardBus", "SwitchboardProtocol", "SwitchboardCredentials", "SwitchboardHTTP", "SwitchboardBackends"],
        swiftSettings: swiftSettings
    ),
    // The auth/token manager's logic (service `auth`): the accounts, log-ins, sessions.
    .target(
        name: "SwitchboardAuth",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"), "SwitchboardRuntime", "SwitchboardObservability",
            "SwitchboardTokens", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardCredentials", "SwitchboardHTTP",
            "SwitchboardBackends",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-auth",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardAuth", "SwitchboardTokens", "SwitchboardBus", "SwitchboardCredentials", "SwitchboardHTTP", "SwitchboardRuntime",
            "SwitchboardSecurity", "SwitchboardObservability", "ZeroMQ",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardAuthTests",
        dependencies: [
            "SwitchboardRuntime",
            "SwitchboardAuth", "SwitchboardTokens", "SwitchboardBus", "SwitchboardBroker", "SwitchboardCredentials", "SwitchboardHTTP",
            "SwitchboardBackends", "SwitchboardEmulators", "SwitchboardTesting", "SwitchboardProtocol", "ZeroMQ",
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    // The workers' logic (FileMaker writer, ETO recorder and service, Directory syncer) and what
    // they share: group membership as a Service, settlements as values, start-up, options.
    .target(
        name: "SwitchboardWorkers",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardTokens", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardCredentials", "SwitchboardHTTP",
            "SwitchboardBackends",
            "SwitchboardRuntime", "SwitchboardSecurity", "SwitchboardStorage", "ZeroMQ",
            "SwitchboardObservability",
            .product(name: "CoreMetrics", package: "swift-metrics"),
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "GRDB", package: "GRDB.swift"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        exclude: ["README.md"],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-filemaker",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardWorkers", "SwitchboardTokens", "SwitchboardBackends", "SwitchboardProtocol", "SwitchboardRuntime",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-eto",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardWorkers", "SwitchboardTokens", "SwitchboardBackends", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime",
            "SwitchboardSecurity",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-directory",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardWorkers", "SwitchboardTokens", "SwitchboardBackends", "SwitchboardBus", "SwitchboardProtocol", "SwitchboardRuntime",
            "SwitchboardSecurity",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardWorkersTests",
        dependencies: [
            "SwitchboardRuntime",
            "SwitchboardWorkers", "SwitchboardBackends", "SwitchboardBroker", "SwitchboardBus", "SwitchboardCredentials",
            "SwitchboardEmulators", "SwitchboardHTTP", "SwitchboardProtocol", "SwitchboardTesting", "ZeroMQ",
            .product(name: "Logging", package: "swift-log"), .product(name: "GRDB", package: "GRDB.swift"),
        ],
        swiftSettings: swiftSettings
    ),
    // Local stand-ins for ETO, FileMaker Data API, Directory and SAP Mobile Services.
    .target(
        name: "SwitchboardEmulators",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"), "SwitchboardRuntime",
            "SwitchboardProtocol",
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdCore", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        exclude: ["README.md"],
        resources: [.copy("Resources/seed.json")],
        swiftSettings: swiftSettings
    ),
    .executableTarget(
        name: "switchboard-emulator",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardEmulators", "SwitchboardRuntime",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOPosix", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardHTTPTests",
        dependencies: [
            "SwitchboardHTTP", "SwitchboardTesting",
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "Hummingbird", package: "hummingbird"),
            .product(name: "HummingbirdTLS", package: "hummingbird"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "X509", package: "swift-certificates"),
            .product(name: "SwiftASN1", package: "swift-asn1"),
            .product(name: "HTTPTypes", package: "swift-http-types"),
            .product(name: "Crypto", package: "swift-crypto"),
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardCredentialsTests",
        dependencies: ["SwitchboardCredentials", "SwitchboardTesting"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardEmulatorsTests",
        dependencies: [
            "SwitchboardRuntime",
            "SwitchboardEmulators", "SwitchboardTesting", "SwitchboardProtocol",
            .product(name: "AsyncHTTPClient", package: "async-http-client"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOSSL", package: "swift-nio-ssl"),
            .product(name: "NIOFoundationCompat", package: "swift-nio"),
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "ZeroMQTests",
        dependencies: [
            "ZeroMQ", .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardRuntimeTests",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"), "SwitchboardRuntime", "SwitchboardTesting",
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardSecurityTests", dependencies: ["SwitchboardSecurity", "SwitchboardRuntime", "SwitchboardTesting"],
        swiftSettings: swiftSettings),
    .testTarget(
        name: "SwitchboardProtocolTests",
        dependencies: ["SwitchboardProtocol", "SwitchboardTesting"],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardBrokerTests",
        dependencies: [
            .product(name: "Configuration", package: "swift-configuration"),
            "SwitchboardBroker", "SwitchboardProtocol", "ZeroMQ", "SwitchboardBus", "SwitchboardTesting", "SwitchboardSecurity",
            "SwitchboardRuntime", "SwitchboardStorage",
            .product(name: "Logging", package: "swift-log"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "SwitchboardBusTests",
        dependencies: [
            "SwitchboardBus", "SwitchboardBroker", "SwitchboardProtocol", "ZeroMQ", "SwitchboardTesting", "SwitchboardRuntime",
            "SwitchboardStorage", .product(name: "Logging", package: "swift-log"),
            .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            .product(name: "GRDB", package: "GRDB.swift"),
        ],
        swiftSettings: swiftSettings
    ),
    .testTarget(
        name: "EndToEndTests",
        dependencies: [
            "SwitchboardProtocol", "ZeroMQ", "SwitchboardBus", "SwitchboardTesting", "SwitchboardRuntime", "SwitchboardSecurity",
            "SwitchboardHTTP", "SwitchboardBackends", "SwitchboardKiosk",
            .product(name: "Logging", package: "swift-log"),
        ],
        swiftSettings: swiftSettings
    ),
]

// The benchmark executable is only part of the build when asked for, so the test run never
// compiles it: `SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench`.
if ProcessInfo.processInfo.environment["SWITCHBOARD_BENCH"] == "1" {
    products.append(.executable(name: "switchboard-bench", targets: ["switchboard-bench"]))
    targets.append(
        .executableTarget(
            name: "switchboard-bench",
            dependencies: [
                "CZeroMQ", "ZeroMQ", "SwitchboardProtocol", "SwitchboardRuntime", "SwitchboardTesting", "SwitchboardBus",
                "SwitchboardSecurity", "SwitchboardEmulators", "SwitchboardBackends", "SwitchboardHTTP", "SwitchboardWorkers",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ],
            path: "bench/SwitchboardBench",
            swiftSettings: swiftSettings
        )
    )
}

let package = Package(
    name: "Switchboard",
    platforms: [.macOS(.v15)],
    products: products,
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // CommandLineArguments: flags are one of the reader's providers (ProgramConfiguration).
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: ["JSON", "CommandLineArguments"]),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: targets
)
