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

/// `switchboard-bench --filemaker-writes ACCOUNTS N [IN-FLIGHT]` (issue 16's bound, run by
/// bench/workers.sh): writes N CheckIns records to the FileMaker account of an auth accounts
/// file (its `base_url`, account and password; the password stays in the 0600 file, never on
/// a command line) through FileMakerClient alone, IN-FLIGHT (default 16, the writer's credit)
/// at a time: the same fields and the same one create per record as `switchboard-filemaker`
/// with the built-in mapping, without the bus. Its CPU per record is the least any writer
/// built on this HTTP stack spends.
func fileMakerWrites(arguments: [String]) async throws {
    guard arguments.count >= 2, let count = Int(arguments[1]), count > 0 else {
        throw BenchError("usage: switchboard-bench --filemaker-writes ACCOUNTS-FILE N [IN-FLIGHT]")
    }
    let inFlight = arguments.count > 2 ? Int(arguments[2]) ?? 16 : 16
    let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: arguments[0]))) as? [String: Any]
    guard
        let account = (file?["accounts"] as? [[String: Any]])?.first(where: { $0["backend"] as? String == "filemaker" }),
        let url = account["base_url"] as? String, let name = account["account"] as? String, let password = account["password"] as? String
    else { throw BenchError("\(arguments[0]) has no filemaker account with base_url, account and password") }
    let database = (account["options"] as? [String: Any])?["database"] as? String ?? "Shelter"
    var logger = Logger(label: "bench")
    logger.logLevel = .warning
    let http = try SwitchboardHTTPClient(logger: logger)
    let client = FileMakerClient(http: http, serverURL: url, database: database, logger: logger)
    let session = try await client.logIn(account: name, password: password)
    try await withThrowingTaskGroup(of: Void.self) { group in
        for lane in 0..<inFlight {
            group.addTask {
                // Lane k writes rows k+1, k+1+IN-FLIGHT, …: every lane busy until the last few.
                for index in stride(from: lane + 1, through: count, by: inFlight) {
                    _ = try await client.createIfAbsent(
                        layout: "CheckIns", uniqueField: "EventID", value: UUID().uuidString.lowercased(),
                        fieldData: [
                            "FirstName": .text("Ana"), "LastName": .text("Person\(index)"),
                            "CheckedInAt": .text("11/24/2026 20:00:00"), "Notes": .text("client row \(index)"),
                        ],
                        uniqueValidated: true, auth: .fixed(session))
                }
            }
        }
        try await group.waitForAll()
    }
    try await client.logOut(session)
    try await http.shutdown()
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
