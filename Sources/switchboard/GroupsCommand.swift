import ArgumentParser
import Foundation
import SwitchboardBus
import SwitchboardProtocol

/// `switchboard groups …`: the broker's consumer groups, through its groups endpoint.
struct GroupsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groups",
        abstract: "List, create, reset and delete the broker's consumer groups.",
        discussion: """
            `switchboard groups` alone lists them. Reading needs any certificate the broker lets \
            reach its groups endpoint (admin, monitor, worker); creating, resetting and deleting \
            need an admin one (`switchboard up` makes <data-dir>/keys/secrets/operator.secret). \
            Exits 1 when the broker refuses or does not answer within --timeout.
            """,
        subcommands: [List.self, Create.self, Reset.self, Delete.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Show every group: its topics, cursor, lag, deliveries in flight, dead letters and members.")

        @Flag(help: "Print the groups as JSON ({\"groups\": [...]}, the broker's field names).") var json = false
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func run() async throws {
            let groups = try await broker.withGroups("switchboard groups") { client in try await client.groups() }
            if json {
                try printJSON(GroupListing(groups: groups))
            } else {
                print(GroupsCommand.table(groups), terminator: "")
            }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Create a consumer group.",
            discussion: """
                The group takes every event whose type starts with one of its --topic prefixes, \
                from --start on. Creating a group that exists with the same topics leaves it as it \
                is; one that exists with other topics is refused (delete it first).
                """)

        @Argument(help: "The group's name: 1–64 of a–z 0–9 _ -, starting with a letter (a worker's service name).") var name: String
        @Option(name: .customLong("topic"), help: "A type prefix the group takes, e.g. checkin. (repeat for more; 1–32).")
        var topics: [String] = []
        @Option(help: "Where it starts: earliest (everything still journaled), head (only new events) or a bus_seq.")
        var start: String = "earliest"
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws {
            try GroupsCommand.check(name: name)
            guard !topics.isEmpty else { throw ValidationError("give at least one --topic (a type prefix such as checkin.)") }
            guard topics.count <= 32 else { throw ValidationError("at most 32 --topic prefixes, got \(topics.count)") }
            if let empty = topics.first(where: { $0.isEmpty || $0.utf8.count > 128 }) {
                throw ValidationError("--topic '\(empty)' must be 1–128 bytes")
            }
            _ = try GroupsCommand.start(start)
        }

        func run() async throws {
            let start = try GroupsCommand.start(self.start)
            let (existed, group) = try await broker.withGroups("switchboard groups create") { client in
                let existed = try await client.groups().contains { $0.name == name }
                return (existed, try await client.createGroup(name, topics: topics, start: start))
            }
            if existed {
                print("Group '\(group.name)' exists already with these topics; left as it was: \(GroupsCommand.summary(group)).")
            } else {
                print("Created group '\(group.name)': \(GroupsCommand.summary(group)).")
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset",
            abstract: "Start a group again from another place in the journal.",
            discussion: """
                Forgets what the group settled and what its members hold: events from --start on \
                are delivered again (an earlier start) or skipped (a later one). Members stay \
                joined; their answers about deliveries made before the reset are refused as stale.
                """)

        @Argument(help: "The group's name.") var name: String
        @Option(help: "Where it starts now: earliest, head or a bus_seq.") var start: String
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws {
            try GroupsCommand.check(name: name)
            _ = try GroupsCommand.start(start)
        }

        func run() async throws {
            let start = try GroupsCommand.start(self.start)
            let group = try await broker.withGroups("switchboard groups reset") { client in
                try await client.resetGroup(name, start: start)
            }
            print("Reset group '\(group.name)': \(GroupsCommand.summary(group)).")
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Delete a consumer group.",
            discussion: """
                Removes the group, its cursor and its dead-letter records; the dlq.<group> events \
                stay in the journal. Members still joined are refused from then on.
                """)

        @Argument(help: "The group's name.") var name: String
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws { try GroupsCommand.check(name: name) }

        func run() async throws {
            try await broker.withGroups("switchboard groups delete") { client in try await client.deleteGroup(name) }
            print("Deleted group '\(name)'.")
        }
    }

    /// `{"groups": [...]}`, as `groups.list` answers.
    struct GroupListing: Encodable {
        var groups: [GroupInfo]
    }

    static func check(name: String) throws {
        guard GroupName.isValid(name) else {
            throw ValidationError("group name '\(name)' must be 1–64 of a–z 0–9 _ - starting with a letter")
        }
    }

    static func start(_ text: String) throws -> GroupStart {
        guard let start = GroupStart(text) else {
            throw ValidationError("--start must be earliest, head or a bus_seq from 1 to 2^53, got '\(text)'")
        }
        return start
    }

    static func summary(_ group: GroupInfo) -> String {
        "topics \(group.topics.joined(separator: ", ")), start \(group.start), cursor \(group.cursor), head \(group.head), lag \(group.lag)"
    }

    /// One row per group, columns aligned.
    static func table(_ groups: [GroupInfo]) -> String {
        guard !groups.isEmpty else { return "No consumer groups.\n" }
        let header = ["GROUP", "TOPICS", "CURSOR", "HEAD", "LAG", "PENDING", "WAITING", "REDELIVERIES", "DEAD LETTERS", "MEMBERS"]
        let rows = groups.map { group in
            var dead = String(group.deadLetters.dead)
            let settled = [(group.deadLetters.replayed, "replayed"), (group.deadLetters.dropped, "dropped")].filter { $0.0 > 0 }
            if !settled.isEmpty { dead += " (" + settled.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + ")" }
            return [
                group.name, group.topics.joined(separator: ","), String(group.cursor), String(group.head), String(group.lag),
                String(group.pending), String(group.waiting), String(group.redeliveries), dead,
                group.members.isEmpty ? "-" : group.members.map { "\($0.name) \($0.inFlight)/\($0.credit)" }.joined(separator: ", "),
            ]
        }
        return TextTable.render(header, rows)
    }
}
