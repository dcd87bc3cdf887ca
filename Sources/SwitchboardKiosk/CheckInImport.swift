// A CSV file of check-ins is imported whole or not at all: every row is checked before
// anything is queued, and the rows go into the outbox in one transaction with the file's digest,
// so a file half-imported, or imported twice, cannot happen.

public import Foundation
public import SwitchboardBus
public import SwitchboardProtocol

/// A CSV file of check-ins, read and checked: every row made a valid check-in.
public struct CheckInImport: Sendable {
    /// The file as the person named it (in messages).
    public let file: String
    /// One event per row, in file order.
    public let events: [Outbox.NewEvent]
    /// The file's content digest (`FileDigest`), recorded in the outbox with the events.
    public let digest: String

    /// Why a file was refused; nothing was queued. The description names the file, and the line
    /// and column of each refused row (the first 20).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Reads and checks the file at `path`; nothing is queued yet.
    /// - Parameter kioskID: the kiosk recording the check-ins (each row's `kiosk_id`).
    /// - Throws: `Failure` when the file cannot be read, is not UTF-8 or CSV, names an unknown
    ///   column, has no rows, or has any row that is not a valid check-in.
    public init(path: String, kioskID: String) throws(Failure) {
        guard let data = FileManager.default.contents(atPath: path) else { throw Failure(description: "cannot read \(path)") }
        try self.init(data: data, file: path, kioskID: kioskID)
    }

    /// Checks `data`, the content of `file`.
    public init(data: Data, file: String, kioskID: String) throws(Failure) {
        guard let text = String(data: data, encoding: .utf8) else { throw Failure(description: "\(file) is not UTF-8 text") }
        let table: CheckInTable
        do {
            table = try CheckInTable(text)
        } catch {
            switch error {
            case .csv(let problem): throw Failure(description: "\(file): \(problem)")
            case .empty: throw Failure(description: "\(file) is empty")
            }
        }
        if let unknown = table.unknownColumn {
            throw Failure(
                description: "\(file) line 1: unknown column '\(unknown)' (known: \(CheckInForm.columns.joined(separator: ", ")))")
        }
        var events: [Outbox.NewEvent] = []
        var problems: [String] = []
        for row in table.rows {
            guard row.fields.count == table.names.count else {
                problems.append("line \(row.line): \(row.fields.count) fields, the header has \(table.names.count)")
                continue
            }
            do {
                events.append(try .checkIn(try CheckInForm.make(table.values(row), kioskID: kioskID)))
            } catch let problem as CheckInForm.Problem {
                problems.append("line \(row.line), column '\(problem.field)': \(problem.message)")
            } catch {
                problems.append("line \(row.line): \(error)")
            }
        }
        guard problems.isEmpty else {
            let shown = problems.prefix(20).joined(separator: "\n  ")
            throw Failure(
                description:
                    "\(file): \(problems.count) row\(problems.count == 1 ? "" : "s") refused, nothing was queued:\n  \(shown)\(problems.count > 20 ? "\n  …" : "")"
            )
        }
        guard !events.isEmpty else { throw Failure(description: "\(file) has a header but no rows") }
        self.file = file
        self.events = events
        self.digest = FileDigest.of(data)
    }

    /// The file's digest under its base name: what the outbox records so it is imported once.
    public var importDigest: (digest: String, name: String) { (digest, URL(fileURLWithPath: file).lastPathComponent) }

    /// Queues every row in one transaction, recording the file's digest under its base name.
    /// - Throws: `Failure` when the outbox has imported this content before (under any name);
    ///   the outbox's own errors otherwise.
    public func enqueue(into outbox: Outbox) async throws {
        do {
            try await outbox.enqueue(events, importDigest: importDigest)
        } catch let failure as Outbox.Failure {
            throw Failure(description: "\(file): \(failure.description)")
        }
    }
}

/// The people a demo kiosk checks in, in turn: rows of the import's columns, each checked once
/// at start, so a bad row stops the demo before it begins rather than at its turn.
public struct CheckInRoster: Sendable {
    /// Each row's fields by column name.
    public let rows: [[String: String]]

    /// Why a roster was refused; the description names the file (not the option).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// - Throws: `Failure` naming the file and line of the first problem.
    public init(path: String, kioskID: String) throws(Failure) {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw Failure(description: "cannot read \(path) as UTF-8 text")
        }
        let table: CheckInTable
        do {
            table = try CheckInTable(text)
        } catch {
            switch error {
            case .csv(let problem): throw Failure(description: "\(path): \(problem)")
            case .empty: throw Failure(description: "\(path) has no rows")
            }
        }
        guard !table.rows.isEmpty else { throw Failure(description: "\(path) has no rows") }
        if let unknown = table.unknownColumn { throw Failure(description: "\(path) line 1: unknown column '\(unknown)'") }
        rows = try table.rows.map { row throws(Failure) in
            guard row.fields.count == table.names.count else {
                throw Failure(description: "\(path) line \(row.line): \(row.fields.count) fields, the header has \(table.names.count)")
            }
            let values = table.values(row)
            do { _ = try CheckInForm.make(values, kioskID: kioskID) } catch {
                throw Failure(description: "\(path) line \(row.line): \(error)")
            }
            return values
        }
    }

    /// The check-in of the person at `index` (taken round the roster), now.
    public func checkIn(_ index: Int, kioskID: String) throws -> CheckIn {
        try CheckInForm.make(rows[index % rows.count], kioskID: kioskID)
    }
}

/// CSV text whose first row names the columns (`CheckInForm.columns` in any order and case, or
/// `unknownColumn` says which is not one).
struct CheckInTable {
    enum Problem: Error {
        case csv(CheckInForm.Problem)
        case empty
    }

    let names: [String]
    let rows: ArraySlice<(line: Int, fields: [String])>

    init(_ text: String) throws(Problem) {
        let all: [(line: Int, fields: [String])]
        do { all = try CheckInForm.parseCSV(text) } catch { throw .csv(error) }
        guard let header = all.first else { throw .empty }
        names = header.fields.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        rows = all.dropFirst()
    }

    /// The first header name that is not a check-in column.
    var unknownColumn: String? { names.first { !CheckInForm.columns.contains($0) } }

    /// A row's fields by column name (a repeated column: its first value).
    func values(_ row: (line: Int, fields: [String])) -> [String: String] {
        Dictionary(zip(names, row.fields), uniquingKeysWith: { first, _ in first })
    }
}
