import Foundation
import Logging
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

// One test at a time: four of them run a whole `switchboard up` (eight processes each), and
// together beside every other suite they stalled two cores long enough to fail timing tests.
@Suite("Kiosk, monitor and switchboard up (processes)", .serialized)
struct ToolTests {
    @Test("a monitor started late catches up from the journal and follows live: every event once, in order")
    func monitorCatchesUp() async throws {
        let directory = try TemporaryDirectory("monitor")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let kioskArguments = ["--id", "k-mon", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", endpoints.ingest]
        let first = try programs.start(
            "switchboard-kiosk", ["load", "--rate", "0", "--count", "300", "--site", "12", "--program", "3"] + kioskArguments,
            log: "load1.log")
        #expect(await first.waitForExit(timeout: .seconds(120)) == 0)
        // The monitor starts after 300 events, while 300 more arrive.
        let second = try programs.start(
            "switchboard-kiosk", ["load", "--rate", "500", "--count", "300", "--site", "12", "--program", "3"] + kioskArguments,
            log: "load2.log")
        let monitor = try programs.start(
            "switchboard-monitor", ["--json", "--from", "1", "--count", "600", "--fanout", endpoints.fanout, "--replay", endpoints.replay],
            log: "monitor.log")
        #expect(await second.waitForExit(timeout: .seconds(120)) == 0)
        #expect(await monitor.waitForExit(timeout: .seconds(60)) == 0, "monitor: \(programs.read("monitor.log"))")
        let events = programs.read("monitor.log").split(separator: "\n").compactMap { line -> [String: Any]? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], object["bus_seq"] != nil else {
                return nil
            }
            return object
        }
        #expect(events.compactMap { ($0["bus_seq"] as? NSNumber)?.int64Value } == Array(1...600))
        #expect(events.allSatisfy { ($0["type"] as? String) == "checkin.recorded" && ($0["summary"] as? String) != nil })
        #expect(events.contains { ($0["source"] as? String) == "journal" })
        #expect(await broker.stop() == 0)
    }

    @Test(
        "the monitor's operator views: --stats counts each type and producer, lag shows a group's cursor and lag, dlq an empty list; bad options are refused by name"
    )
    func monitorOperatorViews() async throws {
        let directory = try TemporaryDirectory("monitor-views")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        for kiosk in ["k-a", "k-b"] {
            let load = try programs.start(
                "switchboard-kiosk",
                [
                    "load", "--rate", "0", "--site", "12", "--program", "3", "--count", kiosk == "k-a" ? "120" : "80", "--id", kiosk,
                    "--outbox",
                    directory.path("\(kiosk)/outbox.sqlite"), "--ingest", endpoints.ingest,
                ], log: "\(kiosk).log")
            #expect(await load.waitForExit(timeout: .seconds(120)) == 0)
        }
        let stats = try programs.start(
            "switchboard-monitor",
            ["--stats", "--from", "1", "--count", "200", "--fanout", endpoints.fanout, "--replay", endpoints.replay],
            log: "stats.log")
        #expect(await stats.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("stats.log"))")
        let totals = programs.read("stats.log").components(separatedBy: "totals\n").last ?? ""
        let rows = totals.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(rows.contains(["checkin.recorded", "k-a", "120"]), "\(totals)")
        #expect(rows.contains(["checkin.recorded", "k-b", "80"]), "\(totals)")

        let create = try programs.start(
            "switchboard",
            ["groups", "create", "audit", "--topic", "checkin.", "--start", "earliest", "--groups", endpoints.groups, "--insecure"],
            log: "create.log")
        #expect(await create.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("create.log"))")
        let lag = try programs.start("switchboard-monitor", ["lag", "--groups", endpoints.groups], log: "lag.log")
        #expect(await lag.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("lag.log"))")
        let lagRows = programs.read("lag.log").split(separator: "\n").map {
            $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        }
        // No member yet: cursor 0, the 200 check-ins are its lag.
        #expect(lagRows.first?.prefix(4) == ["group", "cursor", "head", "lag"])
        #expect(lagRows.contains { $0.first == "audit" && $0.count > 3 && $0[1] == "0" && $0[3] == "200" }, "\(programs.read("lag.log"))")
        let lagJSON = try programs.start("switchboard-monitor", ["lag", "--json", "--groups", endpoints.groups], log: "lag.json")
        #expect(await lagJSON.waitForExit(timeout: .seconds(30)) == 0)
        #expect(programs.read("lag.json").contains("\"lag\":200"), "\(programs.read("lag.json"))")
        let dlq = try programs.start("switchboard-monitor", ["dlq", "--groups", endpoints.groups], log: "dlq.log")
        #expect(await dlq.waitForExit(timeout: .seconds(30)) == 0)
        #expect(programs.read("dlq.log").contains("No dead letters."))
        let bad = try programs.start("switchboard-monitor", ["lag", "--every", "0", "--groups", endpoints.groups], log: "bad.log")
        #expect(await bad.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("bad.log").contains("--every must be a duration of at least 1s"))
        #expect(await broker.stop() == 0)
    }

    @Test("the monitor hides names, date of birth, location and notes unless --show-personal-data, in JSON and in text")
    func monitorHidesPersonalData() async throws {
        let directory = try TemporaryDirectory("monitor-personal")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        let kiosk = try programs.start(
            "switchboard-kiosk",
            [
                "checkin", "--id", "k-priv", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", endpoints.ingest,
                "--first", "Zelda", "--last", "Quarrington", "--dob", "1987-06-05", "--site", "12", "--program", "3",
                "--latitude", "37.7793", "--longitude", "-122.4192", "--accuracy", "25", "--notes", "sleeps under the Ninth St bridge",
                "--lookup-wait", "0s",
            ], log: "kiosk.log")
        #expect(await kiosk.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("kiosk.log"))")
        let personal = ["Zelda", "Quarrington", "1987-06-05", "37.7793", "-122.4192", "Ninth St"]
        func monitor(_ extra: [String], log: String) async throws -> String {
            let process = try programs.start(
                "switchboard-monitor", extra + ["--from", "1", "--count", "1", "--fanout", endpoints.fanout, "--replay", endpoints.replay],
                log: log)
            #expect(await process.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read(log))")
            return programs.read(log)
        }
        let json = try await monitor(["--json"], log: "json.log")
        let text = try await monitor([], log: "text.log")
        for output in [json, text] {
            #expect(output.contains("k-priv"), "\(output)")
            for value in personal { #expect(!output.contains(value), "\(value) shown: \(output)") }
        }
        #expect(json.contains("[personal]"), "\(json)")
        let shown = try await monitor(["--json", "--show-personal-data"], log: "shown.log")
        for value in personal { #expect(shown.contains(value), "\(value) missing: \(shown)") }
        #expect(await broker.stop() == 0)
    }

    @Test(
        "the monitor's text line: #bus_seq first, the producer's time labelled, and all of filemaker.record.written's content (record_id, event_id) with personal data still hidden"
    )
    func monitorLineShowsRecordAndOrder() async throws {
        let directory = try TemporaryDirectory("monitor-line")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let (broker, endpoints) = try await programs.broker()
        // The writer's event is made first and journaled second: its own time is earlier than
        // the check-in's although it comes after it in the journal, as a worker's resent event
        // or a kiosk back from offline does.
        let outbox = try Outbox(path: directory.path("filemaker/outbox.sqlite"), producer: "filemaker")
        let checkinEventID = UUIDv7.string()
        let written = try JSONSerialization.data(
            withJSONObject: [
                "event_id": checkinEventID, "bus_seq": 1, "database": "Shelter", "layout": "CheckIns", "record_id": "4242",
                "created": true,
            ] as [String: Any])
        try await outbox.enqueue([.init(type: "filemaker.record.written", schema: "filemaker.record.written/1", content: written)])
        let kiosk = try programs.start(
            "switchboard-kiosk",
            [
                "checkin", "--id", "k-line", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", endpoints.ingest,
                "--first", "Zelda", "--last", "Quarrington", "--dob", "1987-06-05", "--site", "12", "--program", "3",
                "--notes", "sleeps under the Ninth St bridge", "--lookup-wait", "0s",
            ], log: "kiosk.log")
        #expect(await kiosk.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("kiosk.log"))")
        let context = try Context()
        let io = try IOThread(context: context)
        let report = try await OutboxSender(outbox: outbox, io: io, endpoint: endpoints.ingest, logger: Logger(label: "test"))
            .deliver(until: .now + .seconds(30))
        await io.shutdown()
        await context.terminate()
        #expect(report.delivered == 1 && report.lastBusSeq == 2, "\(report)")

        let monitor = try programs.start(
            "switchboard-monitor", ["--from", "1", "--count", "2", "--fanout", endpoints.fanout, "--replay", endpoints.replay],
            log: "monitor.log")
        #expect(await monitor.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("monitor.log"))")
        let lines = programs.read("monitor.log").split(separator: "\n").map(String.init).filter { !$0.hasPrefix("--") }
        #expect(lines.count == 2, "\(lines)")
        // Journal order, said first; the time that may go backwards is named as the producer's.
        #expect(lines.first?.hasPrefix("#1  checkin.recorded  k-line  made ") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("#2  filemaker.record.written  filemaker  made ") == true, "\(lines)")
        let line = lines.last ?? ""
        #expect(line.contains(#""record_id":"4242""#) && line.contains(#""event_id":"\#(checkinEventID)""#), "\(line)")
        #expect(line.contains(#""database":"Shelter""#) && line.contains(#""layout":"CheckIns""#), "\(line)")
        for value in ["Zelda", "Quarrington", "1987-06-05", "Ninth St"] {
            #expect(!programs.read("monitor.log").contains(value), "\(value) shown")
        }
        #expect(await broker.stop() == 0)
    }

    @Test("the kiosk refuses bad input with a message naming the field, and queues nothing")
    func kioskBadInput() async throws {
        let directory = try TemporaryDirectory("kiosk-input")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let outbox = directory.path("kiosk/outbox.sqlite")
        let cases: [([String], String)] = [
            (["--first", "Ana", "--last", "Diaz", "--site", "abc", "--program", "3"], "--site"),
            (["--first", "Ana", "--last", "Diaz", "--site", "12"], "--program"),
            (["--first", "Ana", "--last", "Diaz", "--site", "12", "--program", "3", "--dob", "1990-13-01"], "--dob"),
            (["--first", "Ana", "--last", "Diaz", "--site", "12", "--program", "3", "--id", "bad id!"], "--id"),
        ]
        for (index, (arguments, field)) in cases.enumerated() {
            let base = ["checkin", "--outbox", outbox, "--ingest", "tcp://127.0.0.1:9"]
            let kiosk = try programs.start("switchboard-kiosk", base + arguments, log: "bad\(index).log")
            let status = await kiosk.waitForExit(timeout: .seconds(30))
            #expect(status != 0 && status != nil)
            #expect(programs.read("bad\(index).log").contains(field), "\(programs.read("bad\(index).log"))")
        }
        #expect(JournalFile.count(at: outbox, table: "outbox") == 0)

        let csv = directory.path("bad.csv")
        try "first_name,last_name,site_id,program_id\nAna,Diaz,12,3\nLi,Chen,twelve,3\n".write(
            toFile: csv, atomically: true, encoding: .utf8)
        let importer = try programs.start(
            "switchboard-kiosk", ["import", csv, "--outbox", outbox, "--ingest", "tcp://127.0.0.1:9"], log: "csv.log")
        #expect(await importer.waitForExit(timeout: .seconds(30)) != 0)
        #expect(programs.read("csv.log").contains("line 3, column 'site_id'"))
        #expect(JournalFile.count(at: outbox, table: "outbox") == 0, "nothing queued from a file with a bad row")
    }

    @Test("a check-in made while the broker is down is kept and delivered by the next run")
    func kioskOffline() async throws {
        let directory = try TemporaryDirectory("offline")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let outbox = directory.path("kiosk/outbox.sqlite")
        let port = try freePort()
        let offline = try programs.start(
            "switchboard-kiosk",
            [
                "checkin", "--first", "Ana", "--last", "Diaz", "--site", "12", "--program", "3", "--id", "k-off", "--outbox", outbox,
                "--ingest", "tcp://127.0.0.1:\(port)", "--wait", "500ms",
            ],
            log: "offline.log")
        #expect(await offline.waitForExit(timeout: .seconds(30)) == 0)
        #expect(programs.read("offline.log").contains("saved on this kiosk"))
        #expect(JournalFile.count(at: outbox, table: "outbox") == 1)

        let (broker, _) = try await programs.broker(ingest: "tcp://127.0.0.1:\(port)")
        let flush = try programs.start(
            "switchboard-kiosk", ["flush", "--id", "k-off", "--outbox", outbox, "--ingest", "tcp://127.0.0.1:\(port)"], log: "flush.log")
        #expect(await flush.waitForExit(timeout: .seconds(60)) == 0)
        #expect(programs.read("flush.log").contains("Delivered 1 check-in"))
        #expect(programs.journalCount() == 1)
        #expect(await broker.stop() == 0)
    }

    @Test("`kiosk serve` on a taken admin port fails naming it, without first saying it is sending its outbox; with a free one it says so")
    func kioskServeTakenPort() async throws {
        let directory = try TemporaryDirectory("kiosk-taken")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort()
        // Something else listens on the port.
        let taken = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(taken, 1) == 0)
        let arguments = ["serve", "--id", "k-taken", "--outbox", directory.path("kiosk/outbox.sqlite"), "--ingest", "tcp://127.0.0.1:9"]
        let kiosk = try programs.start("switchboard-kiosk", arguments + ["--admin", "127.0.0.1:\(port)"], log: "taken.log")
        let status = await kiosk.waitForExit(timeout: .seconds(30))
        let output = programs.read("taken.log")
        #expect(status != 0 && status != nil, "\(output)")
        #expect(output.contains("\(port)") && !output.contains("sending its outbox"), "\(output)")

        // With a free port the line comes (once the admin server listens), and SIGTERM stops it.
        let freeAdmin = try freePort()
        let free = try programs.start("switchboard-kiosk", arguments + ["--admin", "127.0.0.1:\(freeAdmin)"], log: "free.log")
        try await waitUntil("the admin server listens", timeout: .seconds(30)) {
            (try? await httpGet("http://127.0.0.1:\(freeAdmin)/health/live"))?.status == 200
        }
        #expect(await free.stop() == 0)
        #expect(programs.read("free.log").contains("sending its outbox"), "\(programs.read("free.log"))")
    }

    @Test(
        "beside `switchboard up --port N`, kiosk sites and checkin and the monitor find its broker in .switchboard/broker/endpoints.json, with only a key given, as the README shows"
    )
    func kioskFindsUpsBroker() async throws {
        let directory = try TemporaryDirectory("kiosk-up")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let emulatorPort = try freePort(count: 1)
        let up = try programs.start(
            "switchboard", ["up", "--no-demo", "--port", String(port), "--emulator-port", String(emulatorPort)], log: "up.log")
        try await waitUntil("switchboard up has started everything", timeout: .seconds(90)) {
            guard up.isRunning else { throw WaitTimedOut(description: "up exited: \(programs.read("up.log"))") }
            return programs.read("up.log").contains("Ctrl-C stops everything.")
        }
        // The README's walk-through, from up's working directory: a kiosk key, allowed by a copy.
        let keygen = try programs.start(
            "switchboard", ["keygen", "--name", "riverside-1", "--role", "kiosk", "--out", ".switchboard/keys/secrets"], log: "keygen.log")
        #expect(await keygen.waitForExit(timeout: .seconds(30)) == 0, "\(programs.read("keygen.log"))")
        let copy = try programs.start(
            "cp", [".switchboard/keys/secrets/riverside-1.cert", ".switchboard/keys/allowed/"], log: "cp.log", executable: "/bin/cp")
        #expect(await copy.waitForExit(timeout: .seconds(10)) == 0, "\(programs.read("cp.log"))")
        let kioskKey = [
            "SWITCHBOARD_CERTIFICATE": ".switchboard/keys/secrets/riverside-1.secret",
            "SWITCHBOARD_BROKER_KEY": ".switchboard/keys/secrets/broker.cert",
        ]
        // The allow-list reloads by itself and the eto worker registers its service after it
        // starts: ask again until both have happened.
        var attempt = 0
        try await waitUntil(
            "switchboard-kiosk sites answers through up's broker; the last try: \(programs.read("sites\(attempt).log"))",
            timeout: .seconds(60)
        ) {
            attempt += 1
            let sites = try programs.start("switchboard-kiosk", ["sites"], log: "sites\(attempt).log", environment: kioskKey)
            let status = await sites.waitForExit(timeout: .seconds(30))
            // Every attempt ends, also one the broker refused before its allow-list had the key
            // (it once waited forever on a refused connection); one that did not is stopped.
            #expect(status != nil, "switchboard-kiosk sites did not end: \(programs.read("sites\(attempt).log"))")
            if status == nil { _ = await sites.stop(grace: .seconds(2)) }
            return status == 0 && programs.read("sites\(attempt).log").contains("site 101")
        }
        let checkin = try programs.start(
            "switchboard-kiosk",
            ["checkin", "--first", "Ana", "--last", "Ortiz", "--dob", "1976-02-23", "--site", "101", "--program", "792"],
            log: "checkin.log", environment: kioskKey)
        #expect(await checkin.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("checkin.log"))")
        let output = programs.read("checkin.log")
        #expect(output.contains("ETO knows this person: participant 1000."), "\(output)")
        #expect(output.contains("Delivered 1 check-in"), "\(output)")
        // The walk-through's monitor lines too, with the monitor's key.
        let monitor = try programs.start(
            "switchboard-monitor", ["--topic", "checkin.", "--from", "1", "--count", "1"], log: "monitor.log",
            environment: [
                "SWITCHBOARD_CERTIFICATE": ".switchboard/keys/secrets/monitor.secret",
                "SWITCHBOARD_BROKER_KEY": ".switchboard/keys/secrets/broker.cert",
            ])
        let monitorStatus = await monitor.waitForExit(timeout: .seconds(30))
        if monitorStatus == nil { await monitor.stop() }
        #expect(monitorStatus == 0, "\(programs.read("monitor.log"))")
        #expect(programs.read("monitor.log").contains("checkin.recorded  riverside-1"), "\(programs.read("monitor.log"))")
        // The operator key up made asks auth whether every account works; the kiosk key may not.
        let check = try programs.start("switchboard", ["auth", "check"], log: "auth-check.log")
        #expect(await check.waitForExit(timeout: .seconds(60)) == 0, "\(programs.read("auth-check.log"))")
        let checked = programs.read("auth-check.log")
        #expect(checked.components(separatedBy: "working").count - 1 == 4, "\(checked)")
        let refused = try programs.start("switchboard", ["auth", "check"], log: "auth-check-kiosk.log", environment: kioskKey)
        #expect(await refused.waitForExit(timeout: .seconds(60)) == 1)
        #expect(programs.read("auth-check-kiosk.log").contains("403"), "\(programs.read("auth-check-kiosk.log"))")
        #expect(await up.stop(grace: .seconds(60)) == 0, "\(programs.read("up.log"))")
    }

    @Test(
        "switchboard up starts broker, emulators, auth, the three workers, demo kiosk and monitor; check-ins reach FileMaker and ETO, people reach Staff; all stop cleanly"
    )
    func up() async throws {
        let directory = try TemporaryDirectory("up")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let emulatorPort = try freePort(count: 1)
        let up = try programs.start(
            "switchboard",
            ["up", "--duration", "8s", "--interval", "200ms", "--port", String(port), "--emulator-port", String(emulatorPort)],
            log: "up.log")
        #expect(await up.waitForExit(timeout: .seconds(90)) == 0, "\(programs.read("up.log"))")
        let output = programs.read("up.log")
        #expect(output.contains("checkin.recorded  demo-kiosk-1"))
        // The demo's check-ins are seed participants: both workers act on them.
        #expect(output.contains("filemaker.record.written  filemaker"), "\(output)")
        let fileMakerLog = programs.read(".switchboard/logs/filemaker.log")
        let etoLog = programs.read(".switchboard/logs/eto.log")
        #expect(fileMakerLog.contains("check-in written") && fileMakerLog.contains("filemaker writer stopped"), "\(fileMakerLog)")
        #expect(etoLog.contains("check-in recorded") && etoLog.contains("eto worker stopped"), "\(etoLog)")
        #expect(!etoLog.contains("participant-unmatched"))
        #expect(output.contains("Switchboard stopped cleanly."))
        #expect(output.contains("emulators: ETO, FileMaker, Directory and SAP at https://127.0.0.1:\(emulatorPort)"))
        #expect(output.contains("auth: service `auth`"))
        #expect(programs.read(".switchboard/logs/auth.log").contains("auth serving"))
        #expect(programs.read(".switchboard/logs/auth.log").contains("logging out"), "auth stopped gracefully")
        #expect(FileManager.default.fileExists(atPath: directory.path(".switchboard/emulator/tls/ca.pem")))
        #expect(FileManager.default.fileExists(atPath: directory.path(".switchboard/keys/allowed/auth.cert")))
        #expect(JournalFile.count(at: directory.path(".switchboard/broker/journal.sqlite"), table: "events") > 0)
        // Secure by default: keys were made, secrets private, the allow-list holds the clients.
        #expect(output.contains("CURVE on every endpoint"))
        let allowed = try FileManager.default.contentsOfDirectory(atPath: directory.path(".switchboard/keys/allowed")).sorted()
        #expect(
            allowed == [
                "auth.cert", "demo-kiosk-1.cert", "desk-1.cert", "directory.cert", "eto.cert", "filemaker.cert", "monitor.cert",
                "operator.cert",
            ])
        // The Directory's people reach the bus and FileMaker's Staff mirror.
        #expect(output.contains("person.created  directory"), "\(output)")
        #expect(programs.read(".switchboard/logs/filemaker.log").contains("staff member added"))
        let mode = try FileManager.default.attributesOfItem(atPath: directory.path(".switchboard/keys/secrets/broker.secret"))[
            .posixPermissions]
        #expect((mode as? NSNumber)?.intValue == 0o600)
    }

    /// The pids `up` printed for `name`, in order ("filemaker started (pid 123)", then
    /// "filemaker started (pid 456, restart 1)").
    static func pids(_ name: String, in output: String) -> [Int32] {
        output.split(separator: "\n").compactMap { line -> Int32? in
            guard line.hasPrefix("\(name) started (pid ") else { return nil }
            return Int32(line.dropFirst("\(name) started (pid ".count).prefix { $0.isNumber })
        }
    }

    @Test(
        "switchboard up restarts each program killed with SIGKILL (the three workers, the broker, the emulator): it is ready again within seconds, with a new pid, and nothing else stops"
    )
    func upRestartsKilledPrograms() async throws {
        let directory = try TemporaryDirectory("up-restart")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let port = try freePort(count: 5)
        let emulatorPort = try freePort(count: 1)
        let up = try programs.start(
            "switchboard", ["up", "--no-demo", "--duration", "150s", "--port", String(port), "--emulator-port", String(emulatorPort)],
            log: "up.log")
        let names = ["broker", "emulator", "auth", "filemaker", "eto", "directory", "monitor"]
        let workers = ["filemaker", "eto", "directory"]
        // The workers say READY=1 once they have joined their groups: everything runs by then.
        try await waitUntil("the workers have joined their groups", timeout: .seconds(60)) {
            guard up.isRunning else { throw WaitTimedOut(description: "up exited: \(programs.read("up.log"))") }
            return workers.allSatisfy { programs.read(".switchboard/logs/\($0).log").contains("ready: joined the group") }
        }
        let authority = programs.read(".switchboard/emulator/tls/ca.pem")
        var killed = 0
        for name in workers + ["broker", "emulator"] {
            let before = programs.read("up.log")
            let pid = try #require(Self.pids(name, in: before).last, "\(before)")
            let others = names.filter { $0 != name }.compactMap { Self.pids($0, in: before).last }
            #expect(others.count == names.count - 1)
            let killedAt = ContinuousClock.now
            #expect(kill(pid, SIGKILL) == 0)
            killed += 1
            try await waitUntil("\(name) is ready again", timeout: .seconds(60)) {
                guard up.isRunning else { throw WaitTimedOut(description: "up exited: \(programs.read("up.log"))") }
                return programs.read("up.log").contains("\(name) is ready again (pid ")
                    && programs.read("up.log").components(separatedBy: "\(name) is ready again").count == 2
            }
            let back = killedAt.duration(to: .now)
            print("\(name): ready again \(back) after kill -9")
            let output = programs.read("up.log")
            #expect(output.contains("\(name) exited (signal 9); restarting in 1s (restart 1 of 5 in 5 min)"), "\(output)")
            let newPID = try #require(Self.pids(name, in: output).last)
            #expect(newPID != pid && Self.pids(name, in: output).count == 2, "\(output)")
            #expect(kill(newPID, 0) == 0)
            // Nothing else stopped: the same processes run, and only the killed ones exited.
            for other in others { #expect(kill(other, 0) == 0, "pid \(other) stopped after \(name) was killed: \(output)") }
            #expect(output.components(separatedBy: " exited (").count - 1 == killed, "\(output)")
            if workers.contains(name) {
                let log = programs.read(".switchboard/logs/\(name).log")
                #expect(log.components(separatedBy: "ready: joined the group").count - 1 == 2, "\(log)")
            }
        }
        // The restarted emulator serves the certificate of its first start: the one auth and the
        // workers trust.
        #expect(!authority.isEmpty && programs.read(".switchboard/emulator/tls/ca.pem") == authority)
        #expect(programs.read(".switchboard/logs/emulator.log").components(separatedBy: "test CA written").count - 1 == 1)
        // The workers carry on through a restarted broker and emulator: they joined their groups again.
        try await waitUntil("the workers rejoin their groups after the broker restarts", timeout: .seconds(60)) {
            workers.allSatisfy {
                programs.read(".switchboard/logs/\($0).log").components(separatedBy: "ready: joined the group").count - 1 >= 3
            }
        }
        up.signal(SIGTERM)
        #expect(await up.waitForExit(timeout: .seconds(90)) == 0, "\(programs.read("up.log"))")
        let output = programs.read("up.log")
        #expect(
            output.contains("Switchboard stopped cleanly. Restarts: broker 1, directory 1, emulator 1, eto 1, filemaker 1."), "\(output)")
    }

    @Test(
        "switchboard up gives up on a program that keeps failing: after 5 restarts in 5 min it stops everything and names the program and its log"
    )
    func upGivesUp() async throws {
        let directory = try TemporaryDirectory("up-give-up")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        // The ETO worker's data directory is a file: it fails at every start.
        try FileManager.default.createDirectory(atPath: directory.path(".switchboard"), withIntermediateDirectories: true)
        try "not a directory".write(toFile: directory.path(".switchboard/eto"), atomically: true, encoding: .utf8)
        let port = try freePort(count: 5)
        let emulatorPort = try freePort(count: 1)
        let up = try programs.start(
            "switchboard", ["up", "--no-demo", "--duration", "150s", "--port", String(port), "--emulator-port", String(emulatorPort)],
            log: "up.log")
        // 1 + 2 + 4 + 8 + 16 s of back-off, and six failed starts.
        let status = await up.waitForExit(timeout: .seconds(120))
        let output = programs.read("up.log")
        #expect(status == 1, "\(output)")
        for (restart, delay) in zip(1...5, [1, 2, 4, 8, 16]) {
            #expect(output.contains("restarting in \(delay)s (restart \(restart) of 5 in 5 min)"), "\(output)")
        }
        #expect(output.contains("eto exited (exit code"), "\(output)")
        #expect(output.contains("Stopped: eto kept failing (5 restarts within 5 min, then it exited again); see /"), "\(output)")
        #expect(output.contains(".switchboard/logs/eto.log."), "\(output)")
        // Only the ETO worker failed.
        #expect(output.components(separatedBy: " exited (").count - 1 == 6, "\(output)")
        #expect(!output.contains("Switchboard stopped"))
    }
}
