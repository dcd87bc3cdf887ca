// Issue 5: FileMaker creates per second through our own client (SwitchboardHTTP +
// FileMakerClient, one AsyncHTTPClient underneath) against the emulator, 16 requests in flight
// next to one at a time, in the same run.

import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardTesting

func clientBench(quick: Bool) async throws {
    let seconds: Double = quick ? 2 : 5
    print("FileMaker creates through FileMakerClient against the in-process emulator, \(seconds) s per row")
    var logger = Logger(label: "bench")
    logger.logLevel = .warning
    try await withEmulator { emulator in
        let http = try SwitchboardHTTPClient(logger: logger)
        let client = FileMakerClient(http: http, serverURL: emulator.baseURL, database: "Shelter", logger: logger)
        let session = try await client.logIn(account: "switchboard", password: "fm-demo-Passw0rd!")
        func run(inFlight: Int) async throws -> Double {
            let start = ContinuousClock.now
            let end = start + .milliseconds(Int(seconds * 1000))
            let done = try await withThrowingTaskGroup(of: Int.self) { group in
                for lane in 0..<inFlight {
                    group.addTask {
                        var n = 0
                        while ContinuousClock.now < end {
                            _ = try await client.create(
                                layout: "CheckIns", fieldData: ["EventID": .text("client-\(inFlight)-\(lane)-\(n)"), "FirstName": "Ana"],
                                auth: .fixed(session))
                            n += 1
                        }
                        return n
                    }
                }
                return try await group.reduce(0, +)
            }
            let elapsed = ContinuousClock.now - start
            return Double(done) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }
        let one = try await run(inFlight: 1)
        print(String(format: "%-44@ %10.0f creates/s  baseline", "1 request at a time" as NSString, one))
        let sixteen = try await run(inFlight: 16)
        print(String(format: "%-44@ %10.0f creates/s  %.2f× one at a time", "16 requests in flight" as NSString, sixteen, sixteen / one))
        try await client.logOut(session)
        try await http.shutdown()
    }
}
