import Foundation
import SwitchboardRuntime
import SwitchboardTesting
import Testing

extension WorkerProcessTests {
    /// Words no log, reason or metric may show: the names, dates of birth and notes typed into
    /// check-ins that cannot be matched, in every form they were typed.
    static let personalWords = ["Zebulon", "Quixotefar", "Ysolde", "1911-11-11", "1922-02-22", "11/11/1911", "Quillfeather"]

    @Test(
        "check-ins that cannot be matched become dead letters whose reasons, like every log, dlq list (table and --json) and the broker's /metrics, carry ids and codes, never the names, dates of birth or notes typed"
    )
    func deadLettersCarryNoPersonalData() async throws {
        let directory = try TemporaryDirectory("worker-personal-data")
        defer { directory.remove() }
        let brokerPort = try freePort()
        let stack = try await stack(directory, brokerExtra: ["--admin", "127.0.0.1:\(brokerPort)"])
        let programs = stack.programs
        defer { stack.stop() }

        // Back-end text that quotes what was sent: ETO's searches in program 792 fail three
        // times (one delivery's HTTP tries: a NACK whose reason describes the search URL, which
        // holds the last name), its search in 793 is refused with a fault naming the person, and
        // FileMaker refuses the first record with a validation message quoting the value.
        try await stack.fault(#"{"api": "eto", "method": "GET", "path": "/*/Search/792/*", "kind": "status", "status": 503, "count": 3}"#)
        try await stack.fault(
            #"{"api": "eto", "method": "GET", "path": "/*/Search/793/*", "kind": "status", "status": 400, "message": "No participant Ysolde Quixotefar born 1922-02-22 in this program", "count": 1}"#
        )
        try await stack.fault(
            #"{"api": "filemaker", "method": "POST", "path": "/*/records", "kind": "status", "status": 500, "code": "507", "message": "Value 'Zebulon Quixotefar' in field 'FirstName' fails calculation validation", "count": 1}"#
        )
        let fileMaker = try stack.fileMaker("filemaker.log")
        let eto = try stack.eto("eto.log")
        let kiosk = ["--id", "shelter-p", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", stack.endpoints.ingest]
        let csv = directory.path("unmatched.csv")
        try """
        first_name,last_name,date_of_birth,site_id,program_id,notes
        Zebulon,Quixotefar,1911-11-11,101,792,Quillfeather sleeps in bed 14
        Ysolde,Quixotefar,1922-02-22,101,793,
        """.write(toFile: csv, atomically: true, encoding: .utf8)
        let importer = try stack.started.add(
            programs.start("switchboard-kiosk", ["import", csv, "--wait", "60s"] + kiosk, log: "import.log"))
        #expect(await importer.waitForExit(timeout: .seconds(90)) == 0, "\(programs.read("import.log"))")
        // A refused file: a name typed into the site column, a date of birth in US form.
        let bad = directory.path("bad.csv")
        try """
        first_name,last_name,date_of_birth,site_id,program_id,notes
        Zebulon,Quixotefar,1911-11-11,Quixotefar,792,
        Zebulon,Quixotefar,11/11/1911,101,792,
        """.write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try stack.started.add(
            programs.start("switchboard-kiosk", ["import", bad, "--wait", "0s"] + kiosk, log: "bad-import.log"))
        #expect(await refused.waitForExit(timeout: .seconds(60)) != 0)
        #expect(programs.read("bad-import.log").contains("line 2, column 'site_id'"), "\(programs.read("bad-import.log"))")
        #expect(programs.read("bad-import.log").contains("line 3, column 'date_of_birth'"), "\(programs.read("bad-import.log"))")

        // Both unmatched check-ins become `participant-unmatched`; FileMaker's refusal `filemaker-507`.
        func deadLetters() async throws -> [[String: Any]] {
            let (_, output) = try await stack.switchboard(["dlq", "list", "--json"], log: "dlq-poll.log")
            let listed = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any]
            return listed?["dead_letters"] as? [[String: Any]] ?? []
        }
        try await waitUntil("three dead letters", timeout: .seconds(120), interval: .milliseconds(500)) {
            guard eto.isRunning, fileMaker.isRunning else { throw WaitTimedOut(description: "a worker exited") }
            return try await deadLetters().count >= 3
        }
        // A check-in at the kiosk by name: the eto service finds no one; recorded by name.
        let checkIn = try stack.started.add(
            programs.start(
                "switchboard-kiosk",
                [
                    "checkin", "--first", "Zebulon", "--last", "Quixotefar", "--dob", "1911-11-11", "--site", "101", "--program", "792",
                    "--service", stack.endpoints.service, "--lookup-wait", "10s", "--wait", "30s",
                ] + kiosk, log: "checkin.log"))
        #expect(await checkIn.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("checkin.log"))")
        try await waitUntil("four dead letters", timeout: .seconds(60), interval: .milliseconds(500)) {
            try await deadLetters().count >= 4
        }
        let letters = try await deadLetters()
        let codes = letters.compactMap { $0["code"] as? String }.sorted()
        #expect(codes == ["filemaker-507", "participant-unmatched", "participant-unmatched", "participant-unmatched"], "\(letters)")
        let messages = letters.compactMap { $0["message"] as? String }
        #expect(messages.contains { $0.contains("program 792 at site 101") }, "\(messages)")
        #expect(messages.contains { $0.contains("ETO refused the search in program 793 at site 101 (HTTP 400)") }, "\(messages)")
        #expect(messages.contains { $0.contains("FileMaker code 507") && $0.contains("field 'FirstName'") }, "\(messages)")

        _ = try await stack.switchboard(["dlq", "list"], log: "dlq-table.log")
        _ = try await stack.switchboard(["dlq", "list", "--state", "all", "--json"], log: "dlq-json.log")
        #expect(programs.read("dlq-table.log").contains("participant-unmatched"), "\(programs.read("dlq-table.log"))")
        let metrics = try await scrapeMetrics(port: brokerPort)

        for process in [eto, fileMaker] { process.signal(SIGTERM) }
        #expect(await eto.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("eto.log"))")
        #expect(await fileMaker.waitForExit(timeout: .seconds(20)) == 0, "\(programs.read("filemaker.log"))")
        // The reasons were written where the issue found them: the worker's log and the broker's.
        #expect(programs.read("eto.log").contains("participant-unmatched"))
        // The failed searches were retried with a reason that describes the search URL.
        #expect(programs.read("eto.log").contains("eto-http-503"), "\(programs.read("eto.log"))")

        var texts = [("the broker's /metrics", metrics.text)]
        let files = FileManager.default.enumerator(atPath: directory.path)?.compactMap { $0 as? String } ?? []
        for file in files where file.hasSuffix(".log") { texts.append((file, programs.read(file))) }
        #expect(texts.count >= 10, "\(texts.map(\.0))")
        for (name, text) in texts {
            for word in Self.personalWords {
                #expect(!text.localizedCaseInsensitiveContains(word), "\(name) shows '\(word)':\n\(text)")
            }
        }
    }
}
