import ArgumentParser
import Foundation
import SwitchboardBus
import SwitchboardProtocol
import SwitchboardRuntime

/// `switchboard dlq …`: the events consumer groups gave up on.
struct DeadLetterCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dlq",
        abstract: "List, show, replay and drop the dead letters of consumer groups.",
        discussion: """
            A dead letter is an event a group gave up on: a member answered TERM, or it was \
            delivered max_deliver times without an ACK. Listing needs any certificate the broker \
            lets reach its groups endpoint; showing one (its event holds personal data), replaying \
            and dropping need an admin one. Exits 1 when the broker refuses or does not answer.
            """,
        subcommands: [List.self, Show.self, Replay.self, Drop.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List dead letters (without their events), oldest first, a page at a time.",
            discussion: """
                Prints how many there are in all, by code, then the first page (--limit, \
                default 100); --all prints every page as it comes, --after NEXT the page after \
                one that said where the next starts.
                """)

        @Argument(help: "Only this group's (default: every group's).") var group: String?
        @Option(help: "dead (waiting for an operator), replayed, dropped or all.") var state = "dead"
        @Option(help: "Dead letters a page (1–1000).") var limit = 100
        @Flag(help: "Every page, not only the first.") var all = false
        @Flag(help: "Newest first.") var newest = false
        @Option(help: "Start after this point (a page's 'next').") var after: String?
        @Flag(
            help:
                "Print them as JSON ({\"dead_letters\": [...], \"total\", \"by_code\", \"next\"}, the broker's field names; with --all one document of every page)."
        )
        var json = false
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws {
            if let group { try GroupsCommand.check(name: group) }
            guard state == "all" || DeadLetterInfo.State(rawValue: state) != nil else {
                throw ValidationError("--state must be dead, replayed, dropped or all, got '\(state)'")
            }
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be 1–1000, got \(limit)") }
            if all && after != nil { throw ValidationError("give --all or --after, not both") }
        }

        func run() async throws {
            let filter = DeadLetterInfo.State(rawValue: state)
            let (group, limit, all, newest, after, json) = (group, limit, all, newest, after, json)
            let pages = try await broker.withGroups("switchboard dlq list") { client in
                var pages: [DeadLetterPage] = []
                var next = after
                repeat {
                    let page = try await client.deadLetterPage(group: group, state: filter, newest: newest, limit: limit, after: next)
                    if !json { Self.printPage(page, first: pages.isEmpty, all: all, group: group, state: filter) }
                    pages.append(page)
                    next = page.next
                } while all && next != nil
                return pages
            }
            if json {
                guard var combined = pages.first else { return }
                combined.deadLetters = pages.flatMap(\.deadLetters)
                combined.next = pages.last?.next
                try printJSON(combined)
            }
        }

        static func printPage(_ page: DeadLetterPage, first: Bool, all: Bool, group: String?, state: DeadLetterInfo.State?) {
            if first {
                let scope = "\(group.map { " in group '\($0)'" } ?? "")\(state.map { " in state \($0.rawValue)" } ?? "")"
                guard page.total > 0 else {
                    print("No dead letters\(scope).")
                    return
                }
                let codes = page.byCode.sorted { ($1.value, $0.key) < ($0.value, $1.key) }.map { "\($0.key) \($0.value)" }
                print("\(page.total) dead letter\(page.total == 1 ? "" : "s")\(scope): \(codes.joined(separator: ", "))")
            }
            guard !page.deadLetters.isEmpty else { return }
            let header = ["GROUP", "BUS_SEQ", "TYPE", "KEY", "ATTEMPTS", "CODE", "STATE", "AT", "MESSAGE"]
            let rows = page.deadLetters.map { letter in
                [
                    letter.group, String(letter.busSeq), letter.type, letter.key ?? "-", String(letter.attempts), letter.code,
                    letter.state.rawValue, letter.at, letter.message.count > 60 ? String(letter.message.prefix(59)) + "…" : letter.message,
                ]
            }
            print(TextTable.render(header, rows), terminator: "")
            if !all, let next = page.next {
                print("More: --all for every page, or --after \(next) for the next.")
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show one dead letter with its event (admin only: the event holds personal data).")

        @Argument(help: "The group.") var group: String
        @Argument(help: ArgumentHelp("The dead event's bus_seq.", valueName: "bus-seq")) var busSeq: Int64
        @Flag(help: "Print it as JSON (the dead letter's fields and \"event\": {header, content}).") var json = false
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws {
            try GroupsCommand.check(name: group)
            try DeadLetterCommand.check(busSeq: busSeq)
        }

        func run() async throws {
            let detail = try await broker.withGroups("switchboard dlq show") { client in
                try await client.deadLetter(group: group, busSeq: busSeq)
            }
            if json {
                var object = try JSONSerialization.jsonObject(with: JSONEncoder().encode(detail.letter)) as? [String: Any] ?? [:]
                if let header = detail.eventHeader, let content = detail.eventContent {
                    object["event"] = [
                        "header": try JSONSerialization.jsonObject(with: header, options: .fragmentsAllowed),
                        "content": try JSONSerialization.jsonObject(with: content, options: .fragmentsAllowed),
                    ]
                }
                let data = try JSONSerialization.data(
                    withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
                print(String(decoding: data, as: UTF8.self))
                return
            }
            let letter = detail.letter
            var text = "Dead letter of group '\(letter.group)', bus_seq \(letter.busSeq)"
            text += letter.dlqSeq.map { " (reported as dlq.\(letter.group) event \($0))" } ?? ""
            text += "\n"
            let fields: [(String, String)] = [
                ("state", letter.state.rawValue), ("event_id", letter.eventID), ("type", letter.type), ("key", letter.key ?? "-"),
                ("attempts", String(letter.attempts)), ("code", letter.code), ("message", letter.message), ("at", letter.at),
            ]
            for (name, value) in fields { text += "  " + name.padding(toLength: 9, withPad: " ", startingAt: 0) + " " + value + "\n" }
            if let header = detail.eventHeader, let content = detail.eventContent {
                text +=
                    "Event header:\n" + DeadLetterCommand.pretty(header) + "\nEvent content:\n" + DeadLetterCommand.pretty(content) + "\n"
            } else {
                text += "The event is no longer journaled (retention removed it): it cannot be replayed.\n"
            }
            print(text, terminator: "")
        }
    }

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "replay",
            abstract: "Deliver dead letters to their group again, counting attempts from 1.",
            discussion: """
                Give the bus_seq of one dead letter, or --all for every one of the group still \
                in state dead (--code and --older-than narrow it). --all works in steps of 500 \
                and shows its progress; dead letters that die again meanwhile wait for the next \
                run, so each is replayed once.
                """)

        @Argument(help: "The group.") var group: String
        @Argument(help: ArgumentHelp("The dead event's bus_seq.", valueName: "bus-seq")) var busSeq: Int64?
        @OptionGroup var selection: BulkSelection
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws { try selection.validate(group: group, busSeq: busSeq) }

        func run() async throws {
            try await DeadLetterCommand.settle(.replay, group: group, busSeq: busSeq, selection: selection, broker: broker)
        }
    }

    struct Drop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "drop",
            abstract: "Give up on dead letters for good: the group will not see them again.",
            discussion: """
                Give the bus_seq of one dead letter, or --all for every one of the group still \
                in state dead (--code and --older-than narrow it), in steps with progress.
                """)

        @Argument(help: "The group.") var group: String
        @Argument(help: ArgumentHelp("The dead event's bus_seq.", valueName: "bus-seq")) var busSeq: Int64?
        @OptionGroup var selection: BulkSelection
        @OptionGroup(title: "Broker connection") var broker: BrokerOptions

        func validate() throws { try selection.validate(group: group, busSeq: busSeq) }

        func run() async throws {
            try await DeadLetterCommand.settle(.drop, group: group, busSeq: busSeq, selection: selection, broker: broker)
        }
    }

    /// What `replay` and `drop` do to the dead letters they select.
    enum Settlement: String {
        case replay, drop

        var past: String { self == .replay ? "Replayed" : "Dropped" }
        var after: String { self == .replay ? ": the group delivers them again from attempt 1." : "." }
    }

    /// `replay` and `drop`: one dead letter by its bus_seq, or what `selection` selects.
    static func settle(
        _ verb: Settlement, group: String, busSeq: Int64?, selection: BulkSelection, broker: BrokerOptions
    )
        async throws
    {
        let what: String
        if let busSeq {
            let settled = try await broker.withGroups("switchboard dlq \(verb.rawValue)") { client in
                switch verb {
                case .replay: try await client.replay(group: group, .busSeq(busSeq))
                case .drop: try await client.drop(group: group, .busSeq(busSeq))
                }
            }
            what = describe(settled)
        } else {
            what = count(try await selection.settle(replay: verb == .replay, group: group, broker: broker).count)
        }
        print("\(verb.past) \(what) of group '\(group)'\(verb.after)")
    }

    /// `--all` and what narrows it, for `replay` and `drop`.
    struct BulkSelection: ParsableArguments {
        @Flag(help: "Every dead letter of the group still waiting (or those --code and --older-than select).") var all = false
        @Option(help: "With --all: only dead letters with this code (e.g. participant-unmatched).") var code: String?
        @Option(name: .customLong("older-than"), help: "With --all: only those dead for longer than this (e.g. 30m, 2h, 1d).")
        var olderThan: String?

        func validate(group: String, busSeq: Int64?) throws {
            try DeadLetterCommand.validate(group: group, busSeq: busSeq, all: all)
            if !all && (code != nil || olderThan != nil) { throw ValidationError("--code and --older-than go with --all") }
            if let code, code.isEmpty || code.count > 64 { throw ValidationError("--code must be 1–64 characters") }
            if let olderThan, DurationText.parse(olderThan) == nil {
                throw ValidationError("--older-than: '\(olderThan)' is not a duration")
            }
        }

        /// Replays or drops what this selects, step by step, showing progress (`ProgressLine`):
        /// one line that updates itself on a terminal, a line every 5 s otherwise.
        func settle(replay: Bool, group: String, broker: BrokerOptions) async throws -> [Int64] {
            let age = olderThan.flatMap { DurationText.parse($0) }
            let before = age.map { Date(timeIntervalSinceNow: -Double($0.components.seconds)) }
            var line = ProgressLine(verb: replay ? "replayed" : "dropped", total: nil)
            let done = try await broker.withGroups("switchboard dlq \(replay ? "replay" : "drop")") { client in
                let settled = try await client.settleAll(replay: replay, group: group, code: code, before: before) { done, remaining in
                    line.total = done + remaining
                    if let text = line.update(done: done, at: .now) { ProgressWatch.standardOutput(text) }
                }
                if let text = line.finish(done: settled.count, at: .now) { ProgressWatch.standardOutput(text) }
                return settled
            }
            return done
        }
    }

    static func check(busSeq: Int64) throws {
        guard (1...FetchHeader.maximumSequence).contains(busSeq) else {
            throw ValidationError("bus-seq must be 1–\(FetchHeader.maximumSequence), got \(busSeq)")
        }
    }

    static func validate(group: String, busSeq: Int64?, all: Bool) throws {
        try GroupsCommand.check(name: group)
        switch (busSeq, all) {
        case (nil, false): throw ValidationError("give the dead letter's bus-seq, or --all for every dead letter of '\(group)'")
        case (_?, true): throw ValidationError("give a bus-seq or --all, not both")
        case (let seq?, false): try check(busSeq: seq)
        case (nil, true): break
        }
    }

    static func count(_ count: Int) -> String { count == 1 ? "1 dead letter" : "\(count) dead letters" }

    static func describe(_ busSeqs: [Int64]) -> String {
        busSeqs.count == 1
            ? "the dead letter of bus_seq \(busSeqs[0])"
            : "\(busSeqs.count) dead letters (bus_seq \(busSeqs.map(String.init).joined(separator: ", ")))"
    }

    static func pretty(_ json: Data) -> String {
        guard let object = try? JSONSerialization.jsonObject(with: json, options: .fragmentsAllowed),
            let data = try? JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes, .fragmentsAllowed])
        else { return String(decoding: json, as: UTF8.self) }
        return String(decoding: data, as: UTF8.self)
    }
}
