import Crypto
public import Foundation
public import SwitchboardProtocol

/// Turns what a person typed (flags, a CSV row) into a valid `CheckIn`, or an error that
/// names the field in the words the person used.
public enum CheckInForm {
    /// The columns a CSV file may have; the header row names them, in any order.
    public static let columns = [
        "first_name", "last_name", "date_of_birth", "eto_participant_id", "site_id", "program_id", "checked_in_at",
        "latitude", "longitude", "accuracy_m", "notes",
    ]

    public struct Problem: Error, CustomStringConvertible, Sendable, Hashable {
        /// The field as the person knows it (a flag or a CSV column).
        public var field: String
        public var message: String
        public var description: String { "\(field): \(message)" }
    }

    /// Builds a check-in from named text fields (`columns`); empty text counts as absent.
    /// - Parameter fieldName: how to call a field in errors (`--site` for flags, `site_id` in CSV).
    public static func make(
        _ values: [String: String], kioskID: String, now: Date = Date(), fieldName: (String) -> String = { $0 }
    ) throws(Problem) -> CheckIn {
        func text(_ key: String) -> String? {
            guard let value = values[key]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
            return value
        }
        // Problems name the field, never its value: they are printed and logged, and a value
        // typed into the wrong column (a name, a date of birth, a position) is personal data.
        func integer(_ key: String) throws(Problem) -> Int64? {
            guard let value = text(key) else { return nil }
            guard let number = Int64(value), number >= 1 else {
                throw Problem(field: fieldName(key), message: "must be a positive whole number")
            }
            return number
        }
        func decimal(_ key: String) throws(Problem) -> Double? {
            guard let value = text(key) else { return nil }
            guard let number = Double(value), number.isFinite else {
                throw Problem(field: fieldName(key), message: "must be a number")
            }
            return number
        }
        guard let site = try integer("site_id") else { throw Problem(field: fieldName("site_id"), message: "is required") }
        guard let program = try integer("program_id") else { throw Problem(field: fieldName("program_id"), message: "is required") }
        let latitude = try decimal("latitude")
        let longitude = try decimal("longitude")
        let accuracy = try decimal("accuracy_m")
        var location: CheckIn.Location?
        switch (latitude, longitude, accuracy) {
        case (nil, nil, nil): location = nil
        case (let lat?, let lon?, let acc?): location = .init(latitude: lat, longitude: lon, accuracyMeters: acc)
        default:
            let missing = [("latitude", latitude), ("longitude", longitude), ("accuracy_m", accuracy)].first { $0.1 == nil }!.0
            throw Problem(
                field: fieldName(missing), message: "is required when a location is given (latitude, longitude and accuracy together)")
        }
        var checkedInAt = Timestamp.format(now)
        if let given = text("checked_in_at") { checkedInAt = given }
        let checkIn = CheckIn(
            participant: .init(
                etoParticipantID: try integer("eto_participant_id"), firstName: text("first_name"), lastName: text("last_name"),
                dateOfBirth: text("date_of_birth")),
            siteID: site, programID: program, kioskID: kioskID, checkedInAt: checkedInAt, location: location,
            notes: text("notes"))
        do {
            try checkIn.validate()
        } catch {
            // "content: field 'participant.date_of_birth' must …" → the person's field name.
            let message = error.message
            if let open = message.range(of: "field '"), let close = message[open.upperBound...].range(of: "'") {
                let path = String(message[open.upperBound..<close.lowerBound])
                let key = path.split(separator: ".").last.map(String.init) ?? path
                let rest = message[close.upperBound...].trimmingCharacters(in: .whitespaces)
                throw Problem(field: fieldName(key == "participant" ? "last_name" : key), message: rest)
            }
            throw Problem(field: "check-in", message: message)
        }
        return checkIn
    }

    /// Parses CSV text (RFC 4180: quoted fields, doubled quotes, CRLF or LF) into rows.
    /// - Throws: `Problem` naming the line of an unterminated quote.
    public static func parseCSV(_ text: String) throws(Problem) -> [(line: Int, fields: [String])] {
        var rows: [(Int, [String])] = []
        var field = ""
        var fields: [String] = []
        var inQuotes = false
        var line = 1
        var rowStart = 1
        var iterator = text.unicodeScalars.makeIterator()
        var pending: Unicode.Scalar? = iterator.next()
        func endRow() {
            fields.append(field)
            field = ""
            if !(fields.count == 1 && fields[0].isEmpty) { rows.append((rowStart, fields)) }
            fields = []
        }
        while let c = pending {
            pending = iterator.next()
            if inQuotes {
                if c == "\"" {
                    if pending == "\"" {
                        field.unicodeScalars.append("\"")
                        pending = iterator.next()
                    } else {
                        inQuotes = false
                    }
                } else {
                    if c == "\n" { line += 1 }
                    field.unicodeScalars.append(c)
                }
                continue
            }
            switch c {
            case "\"" where field.isEmpty: inQuotes = true
            case ",":
                fields.append(field)
                field = ""
            case "\r":
                if pending == "\n" { pending = iterator.next() }
                endRow()
                line += 1
                rowStart = line
            case "\n":
                endRow()
                line += 1
                rowStart = line
            default: field.unicodeScalars.append(c)
            }
        }
        if inQuotes { throw Problem(field: "line \(rowStart)", message: "a quoted field is not closed") }
        if !field.isEmpty || !fields.isEmpty { endRow() }
        return rows
    }
}

extension CheckInForm {
    /// The ordering key of a check-in (the EVENT's `key`): the same person's check-ins stay in
    /// order downstream and are never in flight to two members of a group at once. `eto:<id>` when
    /// the participant id is known; else `person:` and 16 hexadecimal digits of the SHA-256 of
    /// the name and date of birth, trimmed, folded to lower case and with inner spaces collapsed,
    /// so the key (which travels in headers, logs, dead letters and other events) names no one.
    /// A person checked in once by id and once by name gets two keys: their order holds per key.
    public static func orderingKey(_ checkIn: CheckIn) -> String {
        if let id = checkIn.participant.etoParticipantID { return "eto:\(id)" }
        func fold(_ text: String?) -> String {
            (text ?? "").lowercased().split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        let identity = [checkIn.participant.firstName, checkIn.participant.lastName, checkIn.participant.dateOfBirth].map(fold)
            .joined(separator: "|")
        let digest = SHA256.hash(data: Data(identity.utf8))
        return "person:" + digest.prefix(8).map { String(format: "%02x", $0) }.joined()
    }
}
