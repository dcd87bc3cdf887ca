// The cost of Ironhouse: the same ingest and Majordomo loads against a broker running CURVE
// with ZAP and role checks, and against one run with --insecure (NULL), in the same run.
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench --security [--quick]

import Foundation
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardTesting
import ZeroMQ

func securityBench(quick: Bool) async throws {
    let scale = quick ? 10 : 1
    print(
        "Switchboard security benchmark (CURVE vs NULL), \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores\(quick ? " (quick)" : "")\n"
    )
    let directory = try TemporaryDirectory("security-bench")
    defer { directory.remove() }
    let secrets = directory.path("secrets")
    let allowed = directory.path("allowed")
    try FileManager.default.createDirectory(atPath: allowed, withIntermediateDirectories: true)
    let brokerCertificate = Certificate(name: "broker", role: .broker, keys: try CurveKeyPair.generate())
    try brokerCertificate.write(to: secrets)
    var principals: [String: Certificate] = [:]
    let roles: [(String, Role)] =
        (0..<4).map { ("s\($0)", .kiosk) } + [
            ("bench-client", .worker(service: "bench.client")), ("bench-worker", .worker(service: "bench.echo")),
        ]
    for (name, role) in roles {
        let certificate = Certificate(name: name, role: role, keys: try CurveKeyPair.generate())
        let (publicPath, _) = try certificate.write(to: secrets)
        try FileManager.default.copyItem(atPath: publicPath, toPath: (allowed as NSString).appendingPathComponent("\(name).cert"))
        principals[name] = certificate
    }
    let optionsByName = principals.mapValues { ClientCredentials(certificate: $0, brokerKey: brokerCertificate.publicKey).socketOptions }
    @Sendable func options(_ name: String) -> [SocketOption] { optionsByName[name] ?? [] }
    let secureArguments = [
        "--security-key", (secrets as NSString).appendingPathComponent("broker.secret"), "--security-certificates", allowed,
    ]

    var rows: [(String, String, String)] = []
    func row(_ name: String, _ value: String, _ note: String) {
        rows.append((name, value, note))
        print(String(format: "%-52@ %12@  %@", name as NSString, value as NSString, note as NSString))
    }
    // Alternate the two, twice, and keep each one's better run (the machine is shared).
    var plainIngest: [Measured] = []
    var curveIngest: [Measured] = []
    var plainTrips: [RoundTrips] = []
    var curveTrips: [RoundTrips] = []
    for round in 0..<2 {
        let plain = try await BrokerProcess.start(directory: directory.path("plain-\(round)"))
        plainIngest.append(try await ingest(broker: plain.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000, prefix: "s"))
        plainTrips.append(
            try await brokerEcho(endpoint: plain.endpoints.service, clients: 8, workers: 4, perClient: 4_000 / scale, body: sampleBody))
        await plain.stop()
        let curve = try await BrokerProcess.start(directory: directory.path("curve-\(round)"), security: secureArguments)
        curveIngest.append(
            try await ingest(broker: curve.endpoints, producers: 4, perProducer: 25_000 / scale, window: 1000, prefix: "s") {
                options("s\($0)")
            })
        curveTrips.append(
            try await brokerEcho(
                endpoint: curve.endpoints.service, clients: 8, workers: 4, perClient: 4_000 / scale, body: sampleBody,
                clientOptions: options("bench-client"), workerOptions: options("bench-worker")))
        await curve.stop()
    }
    let bestPlain = plainIngest.max { $0.perSecond < $1.perSecond }!
    let bestCurve = curveIngest.max { $0.perSecond < $1.perSecond }!
    row("durable-acked ingest, 4 producers, NULL (--insecure)", String(format: "%.0f/s", bestPlain.perSecond), "")
    row(
        "durable-acked ingest, 4 producers, CURVE + ZAP + roles", String(format: "%.0f/s", bestCurve.perSecond),
        String(format: "%.2f× NULL", bestCurve.perSecond / bestPlain.perSecond))
    let tripsPlain = plainTrips.max { $0.perSecond < $1.perSecond }!
    let tripsCurve = curveTrips.max { $0.perSecond < $1.perSecond }!
    row(
        "Majordomo round trips, 8 clients, NULL", String(format: "%.0f/s", tripsPlain.perSecond),
        "p50 \(micros(tripsPlain.percentile(0.5))), p99 \(micros(tripsPlain.percentile(0.99)))")
    row(
        "Majordomo round trips, 8 clients, CURVE + ZAP + roles", String(format: "%.0f/s", tripsCurve.perSecond),
        String(
            format: "%.2f× NULL; p50 %@ (%.2f× NULL), p99 %@", tripsCurve.perSecond / tripsPlain.perSecond,
            micros(tripsCurve.percentile(0.5)) as NSString, seconds(tripsCurve.percentile(0.5)) / seconds(tripsPlain.percentile(0.5)),
            micros(tripsCurve.percentile(0.99)) as NSString))
    print("\n| measurement | figure | note |\n|---|---|---|")
    for (name, value, note) in rows { print("| \(name) | \(value) | \(note) |") }
}
