import Foundation

/// The FileMaker emulator's state: databases with tables, layouts, scripts and accounts, and the
/// live Data API sessions.
struct FileMakerModel {
    struct Field {
        var name: String
        var type: String
        var unique: Bool
        var global: Bool
        var autoEnter: String?
    }

    struct Container {
        var filename: String
        var contentType: String
        var bytes: Data
    }

    struct Record {
        var id: Int
        var modId: Int
        /// Stored values: `.string` for text, dates and times, `.int`/`.double` for numbers.
        var values: [String: JSON]
        var containers: [String: Container] = [:]
    }

    struct Table {
        var name: String
        var fields: [Field]
        var fieldIndex: [String: Int]
        var records: [Int: Record]
        /// Record ids in creation order (ascending).
        var order: [Int]
        var nextRecordID: Int
        var nextSerial: Int

        /// For each unique field, folded value → record id: FileMaker indexes such fields, and
        /// the emulator must stay fast with hundreds of thousands of records.
        var uniqueIndex: [String: [String: Int]] = [:]

        static func fold(_ value: JSON?) -> String? {
            guard let text = value?.text, !text.isEmpty else { return nil }
            return text.lowercased()
        }

        /// Inserts or replaces a record, keeping the unique index and the order in step.
        mutating func put(_ record: Record) {
            if let old = records[record.id] {
                for field in fields where field.unique {
                    if let key = Self.fold(old.values[field.name]), uniqueIndex[field.name]?[key] == record.id {
                        uniqueIndex[field.name]?[key] = nil
                    }
                }
            } else {
                order.append(record.id)
            }
            records[record.id] = record
            for field in fields where field.unique {
                if let key = Self.fold(record.values[field.name]) { uniqueIndex[field.name, default: [:]][key] = record.id }
            }
        }

        mutating func remove(_ id: Int) -> Bool {
            guard let old = records.removeValue(forKey: id) else { return false }
            for field in fields where field.unique {
                if let key = Self.fold(old.values[field.name]), uniqueIndex[field.name]?[key] == id { uniqueIndex[field.name]?[key] = nil }
            }
            if let index = order.firstIndex(of: id) { order.remove(at: index) }
            return true
        }

        /// Whether `values` repeat a unique field's value held by another record.
        func violatesUnique(_ values: [String: JSON], except id: Int?) -> Bool {
            for field in fields where field.unique {
                guard let key = Self.fold(values[field.name]), let holder = uniqueIndex[field.name]?[key] else { continue }
                if holder != id { return true }
            }
            return false
        }

        func field(_ name: String) -> Field? {
            // A field may be written `Table::Field` on its own table's layout.
            if let index = fieldIndex[name] { return fields[index] }
            if let range = name.range(of: "::"), name[..<range.lowerBound] == self.name {
                return fieldIndex[String(name[range.upperBound...])].map { fields[$0] }
            }
            return nil
        }
    }

    /// A layout's portal: rows of `table` whose `relatedField` equals the record's `matchField`.
    struct Portal {
        var name: String
        var table: String
        var matchField: String
        var relatedField: String
    }

    struct Database {
        var name: String
        var accounts: [String: String]
        var accountOrder: [String]
        var tables: [String: Table]
        var tableOrder: [String]
        /// Layout name → table name.
        var layouts: [String: String]
        var layoutOrder: [String]
        /// Layout name → its portals in layout order (absent: none).
        var portals: [String: [Portal]]
        var scripts: [String: FileMakerSeed.Script]
        var scriptOrder: [String]
    }

    struct Session {
        var token: String
        var database: String
        var account: String
        var lastUsed: Date
        /// Global field values set through `PATCH globals`, which last as long as the session.
        var globals: [String: JSON] = [:]
    }

    var databases: [String: Database] = [:]
    var databaseOrder: [String] = []
    var sessions: [String: Session] = [:]
    var idle: TimeInterval = 15 * 60
    var sessionLimit = 500

    init() {}

    init(seed: FileMakerSeed) {
        idle = TimeInterval(seed.sessionIdleMinutes * 60)
        sessionLimit = seed.sessionLimit
        for database in seed.databases {
            var tables: [String: Table] = [:]
            for table in database.tables {
                let fields = table.fields.map {
                    Field(name: $0.name, type: $0.type, unique: $0.unique ?? false, global: $0.global ?? false, autoEnter: $0.autoEnter)
                }
                var index: [String: Int] = [:]
                for (i, field) in fields.enumerated() { index[field.name] = i }
                var built = Table(
                    name: table.name, fields: fields, fieldIndex: index, records: [:], order: [], nextRecordID: table.nextRecordID,
                    nextSerial: table.nextSerial)
                for record in table.records.sorted(by: { $0.recordId < $1.recordId }) {
                    var values: [String: JSON] = [:]
                    for (name, value) in record.fieldData {
                        switch value {
                        case .text(let s): values[name] = .string(s)
                        case .number(let n): values[name] = n.rounded() == n && abs(n) < 1e15 ? .int(Int64(n)) : .double(n)
                        }
                    }
                    built.put(Record(id: record.recordId, modId: record.modId, values: values))
                }
                built.nextRecordID = max(table.nextRecordID, (built.order.last ?? 0) + 1)
                tables[table.name] = built
            }
            databases[database.name] = Database(
                name: database.name,
                accounts: Dictionary(database.accounts.map { ($0.username, $0.password) }, uniquingKeysWith: { a, _ in a }),
                accountOrder: database.accounts.map(\.username),
                tables: tables, tableOrder: database.tables.map(\.name),
                layouts: Dictionary(database.layouts.map { ($0.name, $0.table) }, uniquingKeysWith: { a, _ in a }),
                layoutOrder: database.layouts.map(\.name),
                portals: Dictionary(
                    database.layouts.compactMap { layout in
                        layout.portals.map { portals in
                            (
                                layout.name,
                                portals.map {
                                    Portal(name: $0.name, table: $0.table, matchField: $0.matchField, relatedField: $0.relatedField)
                                }
                            )
                        }
                    }, uniquingKeysWith: { a, _ in a }),
                scripts: Dictionary(database.scripts.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }),
                scriptOrder: database.scripts.map(\.name))
            databaseOrder.append(database.name)
        }
    }

    /// Runs `body` on the table behind `layout`, in place; nil when the layout does not exist.
    mutating func withTable(_ database: String, layout: String, _ body: (inout Table) -> Reply) -> Reply? {
        guard let tableName = databases[database]?.layouts[layout], databases[database]?.tables[tableName] != nil else { return nil }
        return body(&databases[database]![keyPath: \.tables][tableName]!)
    }

    func seed() -> FileMakerSeed {
        FileMakerSeed(
            sessionIdleMinutes: Int(idle / 60), sessionLimit: sessionLimit,
            databases: databaseOrder.compactMap { databases[$0] }.map { database in
                FileMakerSeed.Database(
                    name: database.name,
                    accounts: database.accountOrder.map { .init(username: $0, password: database.accounts[$0] ?? "") },
                    tables: database.tableOrder.compactMap { database.tables[$0] }.map { table in
                        FileMakerSeed.Table(
                            name: table.name,
                            fields: table.fields.map {
                                .init(
                                    name: $0.name, type: $0.type, unique: $0.unique ? true : nil, global: $0.global ? true : nil,
                                    autoEnter: $0.autoEnter)
                            },
                            records: table.order.compactMap { table.records[$0] }.map { record in
                                var fieldData: [String: SeedValue] = [:]
                                for (name, value) in record.values {
                                    switch value {
                                    case .int(let i): fieldData[name] = .number(Double(i))
                                    case .double(let d): fieldData[name] = .number(d)
                                    default: fieldData[name] = .text(value.text ?? "")
                                    }
                                }
                                return .init(recordId: record.id, modId: record.modId, fieldData: fieldData)
                            },
                            nextRecordID: table.nextRecordID, nextSerial: table.nextSerial)
                    },
                    layouts: database.layoutOrder.map { name in
                        .init(
                            name: name, table: database.layouts[name] ?? "",
                            portals: database.portals[name].map { portals in
                                portals.map {
                                    .init(name: $0.name, table: $0.table, matchField: $0.matchField, relatedField: $0.relatedField)
                                }
                            })
                    },
                    scripts: database.scriptOrder.compactMap { database.scripts[$0] })
            })
    }
}
