// swift-tools-version:6.1
import PackageDescription

// libFuzzer targets for the decoders that read bytes from the network or a file (issue 15).
// A package of its own so the root package, its test command and CI never build these: the
// instrumentation comes from `-sanitize=fuzzer` passed to every module by run.sh, which a
// normal build must not have. See README.md beside this file.

let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// One executable per fuzz target: its `main.swift` defines `LLVMFuzzerTestOneInput` and hands
/// over to libFuzzer's driver (FuzzSupport's `runFuzzer`).
func fuzzTarget(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(name: "fuzz-\(name)", dependencies: ["FuzzSupport"] + dependencies, swiftSettings: swiftSettings)
}

let protocolModule: Target.Dependency = .product(name: "SwitchboardProtocol", package: "Switchboard")

let package = Package(
    name: "SwitchboardFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Switchboard", path: "../..")],
    targets: [
        .target(name: "CFuzzDriver"),
        .target(name: "FuzzSupport", dependencies: ["CFuzzDriver"], swiftSettings: swiftSettings),
        fuzzTarget("envelope", [protocolModule]),
        fuzzTarget("headers", [protocolModule]),
        fuzzTarget("groups", [protocolModule]),
        fuzzTarget("majordomo", [protocolModule]),
        fuzzTarget("json", [protocolModule]),
        fuzzTarget("timestamp", [protocolModule]),
        // The FileMaker emulator's find parser: its three files are linked into the target's
        // directory, so SwitchboardEmulators (Hummingbird, SwiftNIO, NIOSSL) is not built.
        fuzzTarget("findparser", [protocolModule]),
        // The FileMaker emulator's multipart/form-data parser (container uploads): its one file,
        // linked in the same way.
        fuzzTarget("multipart", []),
        // Heavier: SwitchboardKiosk brings ZeroMQ, GRDB, swift-crypto and the rest into the build.
        fuzzTarget("csv", [protocolModule, .product(name: "SwitchboardKiosk", package: "Switchboard")]),
    ]
)
