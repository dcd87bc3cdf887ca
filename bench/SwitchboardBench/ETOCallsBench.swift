// Issue 30.5: ETO calls per check-in on the normal path, for a participant with no earlier
// responses and for one with 1,000. The real `ETOCheckInRecorder` with a real `eto.sqlite`,
// against the in-process emulator over HTTP; calls are counted from the emulator's request log,
// the log-in chain (`Security.svc`, the site session) left out. Two rows per participant: a
// delivery the broker calls `first` (the normal path), and one it does not (a redelivery: the
// recorder looks, listing the subject's whole history, which is what every check-in did before
// the look became conditional). Times are wall time per check-in, one at a time, in whatever
// configuration the bench was built (debug unless `-c release`): compare rows of one run.

import Foundation
import Logging
import SwitchboardBackends
import SwitchboardHTTP
import SwitchboardProtocol
import SwitchboardTesting
import SwitchboardWorkers

func etoCallsBench(quick: Bool) async throws {
    let checkIns = quick ? 5 : 20
    let history = 1000
    var logger = Logger(label: "bench")
    logger.logLevel = .warning
    print("ETO calls per check-in (participant by id, site session aside), \(checkIns) check-ins per row, in-process emulator")
    try await withEmulator { emulator in
        let http = try SwitchboardHTTPClient(logger: logger)
        let client = ETOClient(http: http, baseURL: emulator.baseURL + "/API", logger: logger)
        let account = ETO.Account(email: "intake@riverside.example", password: "eto-demo-Passw0rd!", siteID: 101)
        let session = CredentialSource<ETO.SiteSession>.fixed(try await client.logIn(account))
        let access = ETOSiteAccess(client: client) { _ in session }
        let directory = try TemporaryDirectory("bench-eto-calls")
        defer { directory.remove() }
        let store = try ETOCheckInStore(directory: directory.path("eto"))
        let recorder = ETOCheckInRecorder(eto: access, configuration: .default, store: store, logger: logger)

        // Ana (participant 1000, subject 5000) gets `history` earlier check-ins; 1003 and 1006 have none.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for lane in 0..<4 {
                group.addTask {
                    for _ in 0..<(history / 4) {
                        _ = try await client.addTouchPointResponse(
                            ETO.TouchPointResponse(
                                touchPointID: 54, subjectID: 5000, programID: 792, created: Date(),
                                elements: [.text(822, UUIDv7.string()), .text(821, "earlier \(lane)")]),
                            auth: session)
                    }
                }
            }
            try await group.waitForAll()
        }
        let earlier = try await client.touchPointResponses(subjectID: 5000, touchPointID: 54, auth: session).count
        let none =
            try await client.touchPointResponses(subjectID: 5003, touchPointID: 54, auth: session).count
            + client.touchPointResponses(subjectID: 5006, touchPointID: 54, auth: session).count

        /// The ETO calls the emulator logged after sequence number `after` (log-in chain aside).
        func logged(after: Int) async throws -> (calls: [String], last: Int) {
            let request = HTTPRequest(
                .get, emulator.baseURL, path: ["_emulator", "requests"], query: [("api", "eto"), ("after", String(after))],
                api: .generic("emulator-control"), operation: "requests")
            let body = try await http.execute(request, logger: logger).body
            let entries = try JSONSerialization.jsonObject(with: body) as? [[String: Any]] ?? []
            let calls = entries.compactMap { entry -> String? in
                guard let method = entry["method"] as? String, let path = entry["path"] as? String, !path.contains("Security.svc") else {
                    return nil
                }
                return "\(method) \(path.prefix { $0 != "?" })"
            }
            return (calls, entries.compactMap { $0["seq"] as? Int }.max() ?? after)
        }

        func row(participant: Int64, subject: Int, first: Bool) async throws {
            let responses = try await client.touchPointResponses(subjectID: subject, touchPointID: 54, auth: session).count
            var calls = 0
            var kinds: [String: Int] = [:]
            var elapsed = Duration.zero
            var mark = try await logged(after: 0).last
            for n in 0..<checkIns {
                let checkIn = CheckIn(
                    participant: .init(etoParticipantID: participant), siteID: 101, programID: 792, kioskID: "bench",
                    checkedInAt: "2026-11-22T21:04:00Z")
                let event = WorkerEvent(
                    header: EventHeader(
                        eventID: UUIDv7.string(), type: CheckIn.type, producer: "bench", producerSeq: Int64(n + 1), busSeq: Int64(n + 1),
                        schema: CheckIn.schema, session: "s", key: "participant:\(participant)"),
                    content: try WireJSON.encode(checkIn), attempt: first ? 1 : 2, firstDelivery: first)
                let start = ContinuousClock.now
                let settlement = await recorder.handle(event)
                elapsed += ContinuousClock.now - start
                guard settlement == .done else { throw BenchError("check-in \(n) was \(settlement)") }
                let (made, last) = try await logged(after: mark)
                mark = last
                calls += made.count
                for call in made {
                    // "GET /API/Actor.svc/participant/1000" counts as "participant".
                    let parts = call.split(separator: "/").filter { !$0.allSatisfy(\.isNumber) }
                    kinds[parts.last.map(String.init) ?? call, default: 0] += 1
                }
            }
            let perCall = kinds.sorted { $0.key < $1.key }.map { "\($0.key) \(Double($0.value) / Double(checkIns))" }
            let milliseconds = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
            print(
                String(
                    format: "%-14@ %5d earlier responses  %-22@ %4.2f calls/check-in  %7.2f ms/check-in  (%@)",
                    "participant \(participant)" as NSString, responses, (first ? "first delivery" : "redelivery (looks)") as NSString,
                    Double(calls) / Double(checkIns), milliseconds / Double(checkIns), perCall.joined(separator: ", ") as NSString))
        }
        print("seeded: participant 1000 has \(earlier) responses to TouchPoint 54, participants 1003 and 1006 have \(none)")
        try await row(participant: 1003, subject: 5003, first: true)
        try await row(participant: 1000, subject: 5000, first: true)
        try await row(participant: 1006, subject: 5006, first: false)
        try await row(participant: 1000, subject: 5000, first: false)
        try await http.shutdown()
    }
}
