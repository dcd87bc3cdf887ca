import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting
import Testing
import ZeroMQ

@Suite("switchboard groups and dlq (processes)")
struct GroupsProcessTests {
    /// `{"groups": [...]}` as `switchboard groups --json` prints it.
    struct Listing: Decodable { var groups: [GroupInfo] }

    @Test("groups create, groups (table and --json), dlq list/show/replay, status --json, and the errors, against a broker process")
    func groupsAndDeadLetters() async throws {
        let directory = try TemporaryDirectory("groups-cli")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        // The member below is this test's raw socket, which never heartbeats: a long liveness keeps
        // it a member however long the CLI runs take on a loaded machine.
        let (broker, endpoints) = try await programs.broker(extra: ["--groups-liveness", "120s"])
        var runs = 0
        /// Runs `switchboard` with the broker's groups endpoint and no keys; its exit status and output.
        func run(_ arguments: [String], groups: String? = endpoints.groups) async throws -> (Int32?, String) {
            runs += 1
            let log = "cli-\(runs).log"
            let process = try programs.start(
                "switchboard", arguments + (groups.map { ["--groups", $0, "--insecure"] } ?? []), log: log)
            let status = await process.waitForExit(timeout: .seconds(30))
            return (status, programs.read(log))
        }

        var (status, output) = try await run(["groups", "create", "filemaker", "--topic", "checkin.", "--start", "earliest"])
        #expect(status == 0 && output.contains("Created group 'filemaker': topics checkin., start earliest"), "\(output)")
        (status, output) = try await run(["groups", "create", "filemaker", "--topic", "checkin."])
        #expect(status == 0 && output.contains("exists already"), "\(output)")
        (status, output) = try await run(["dlq", "list"])
        #expect(status == 0 && output.contains("No dead letters in state dead."), "\(output)")

        // A check-in, and a member (this test process) that gives up on it.
        let context = try Context()
        let io = try IOThread(context: context)
        let producer = try await io.open(.dealer, linger: 0) { try $0.connect(endpoints.ingest) }
        let (header, frames) = try Events.frames(seq: 1)
        #expect(try await Events.exchange(producer, frames).command == .ack)
        let member = try await io.open(.dealer, linger: 0) { try $0.connect(endpoints.groups) }
        _ = try await GroupWire.joined(JoinHeader(group: "filemaker", topics: ["checkin."], credit: 2, member: "fm-1"), on: member)
        let (delivery, _) = try await GroupWire.delivery(on: member)
        try await member.send(
            GroupWire.settle(
                SettleHeader(.term, group: "filemaker", busSeq: delivery.busSeq, attempt: 1, code: "bad-data", message: "no such program")))
        let admin = GroupAdminClient(io: io, endpoint: endpoints.groups)
        try await waitUntil("the dead letter") { try await admin.deadLetters().count == 1 }

        (status, output) = try await run(["groups", "--json"])
        #expect(status == 0, "\(output)")
        let listing = try JSONDecoder().decode(Listing.self, from: Data(output.utf8))
        let group = try #require(listing.groups.first)
        #expect(listing.groups.count == 1 && group.name == "filemaker" && group.topics == ["checkin."] && group.deadLetters.dead == 1)
        #expect(group.members.map(\.name) == ["fm-1"])

        (status, output) = try await run(["groups"])
        var lines = output.split(separator: "\n").map(String.init)
        #expect(status == 0 && lines.first?.hasPrefix("GROUP") == true && lines.first?.contains("DEAD LETTERS") == true, "\(output)")
        let row = lines.first { $0.hasPrefix("filemaker") }?.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        #expect(row?[1] == "checkin." && row?[8] == "1" && row?[9] == "fm-1", "\(lines)")

        (status, output) = try await run(["dlq", "list", "filemaker"])
        lines = output.split(separator: "\n").map(String.init)
        // First how many there are, by code; then the page.
        #expect(status == 0 && lines.first == "1 dead letter in group 'filemaker' in state dead: bad-data 1", "\(output)")
        #expect(lines.dropFirst().first?.hasPrefix("GROUP") == true, "\(output)")
        let letter = lines.dropFirst(2).first?.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        #expect(letter?.prefix(7) == ["filemaker", "\(delivery.busSeq)", CheckIn.type, "-", "1", "bad-data", "dead"], "\(output)")
        #expect(output.contains("no such program"))

        (status, output) = try await run(["dlq", "show", "filemaker", "\(delivery.busSeq)"])
        #expect(status == 0 && output.contains(header.eventID) && output.contains("Ana") && output.contains("Event content:"), "\(output)")

        (status, output) = try await run(["dlq", "replay", "filemaker", "\(delivery.busSeq)"])
        #expect(status == 0 && output.contains("Replayed the dead letter of bus_seq \(delivery.busSeq)"), "\(output)")
        let (again, _) = try await GroupWire.delivery(on: member)
        #expect(again.busSeq == delivery.busSeq && again.attempt == 1)
        (status, output) = try await run(["dlq", "list", "--state", "all", "--json"])
        #expect(status == 0 && output.contains("replayed"), "\(output)")

        // `status` shows the same groups, after the services; its JSON gains `groups`.
        (status, output) = try await run(["status", "--service", endpoints.service])
        #expect(status == 0 && output.contains("No services registered.") && output.contains("filemaker  checkin."), "\(output)")
        (status, output) = try await run(["status", "--json", "--service", endpoints.service])
        #expect(status == 0, "\(output)")
        let report = try #require(JSONValue.parse(Data(output.utf8))?.object)
        #expect(report["workers"] == .integer(0))
        guard case .array(let groups)? = report["groups"], case .string("filemaker")? = groups.first?.object?["name"] else {
            Issue.record("no groups in \(output)")
            return
        }

        // Errors: named, and a non-zero exit.
        (status, output) = try await run(["groups", "delete", "nope"])
        #expect(status == 1 && output.contains("switchboard groups delete: group 'nope' not found (404 not-found)"), "\(output)")
        (status, output) = try await run(["dlq", "list", "nope"])
        #expect(status == 1 && output.contains("group 'nope' not found"), "\(output)")
        (status, output) = try await run(["dlq", "drop", "filemaker", "999"])
        #expect(status == 1 && output.contains("has no dead letter waiting for bus_seq 999 (404 not-found)"), "\(output)")
        (status, output) = try await run(["groups", "create", "filemaker", "--topic", "person."])
        #expect(status == 1 && output.contains("(409 conflict)"), "\(output)")
        (status, output) = try await run(["dlq", "replay", "filemaker"])
        #expect(status != 0 && status != nil && output.contains("give the dead letter's bus-seq, or --all"), "\(output)")
        (status, output) = try await run(["groups", "reset", "filemaker", "--start", "0"])
        #expect(status != 0 && output.contains("--start must be earliest, head or a bus_seq"), "\(output)")
        (status, output) = try await run(["groups", "create", "FileMaker", "--topic", "checkin."])
        #expect(status != 0 && output.contains("must be 1–64 of a–z 0–9 _ - starting with a letter"), "\(output)")
        let port = try freePort()
        (status, output) = try await run(
            ["groups", "--timeout", "300ms", "--insecure", "--groups", "tcp://127.0.0.1:\(port)"], groups: nil)
        #expect(
            status == 1
                && output.contains("no answer to 'groups.list' from the broker's groups endpoint tcp://127.0.0.1:\(port) within 300ms"),
            "\(output)")

        (status, output) = try await run(["groups", "delete", "filemaker"])
        #expect(status == 0 && output.contains("Deleted group 'filemaker'."), "\(output)")
        #expect(try await admin.groups().isEmpty)

        await producer.close()
        await member.close()
        await io.shutdown()
        await context.terminate()
        #expect(await broker.stop() == 0)
    }

    @Test("--help documents every option of groups and dlq")
    func help() async throws {
        let directory = try TemporaryDirectory("groups-help")
        defer { directory.remove() }
        let programs = Programs(directory: directory)
        let expected: [([String], [String])] = [
            (
                ["groups", "create", "--help"],
                ["--topic", "--start", "--groups", "--timeout", "--certificate", "--broker-key", "--insecure", "--data-dir"]
            ),
            (["groups", "list", "--help"], ["--json", "--groups"]),
            (["groups", "reset", "--help"], ["--start"]),
            (["dlq", "list", "--help"], ["--state", "--json", "<group>"]),
            (["dlq", "replay", "--help"], ["--all", "<bus-seq>"]),
            (["dlq", "drop", "--help"], ["--all", "<bus-seq>"]),
            (["status", "--help"], ["--service", "--groups", "--json"]),
        ]
        for (index, (arguments, words)) in expected.enumerated() {
            let process = try programs.start("switchboard", arguments, log: "help-\(index).log")
            #expect(await process.waitForExit(timeout: .seconds(30)) == 0)
            let text = programs.read("help-\(index).log")
            for word in words { #expect(text.contains(word), "\(arguments): \(word) in \(text)") }
        }
    }
}
