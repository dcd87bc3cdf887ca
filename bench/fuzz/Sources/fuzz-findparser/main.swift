import Foundation
import FuzzSupport

runFuzzer()

/// The FileMaker emulator's `_find` body parser, as `POST …/layouts/{layout}/_find` runs it on a
/// request's bytes: `JSON.body` (the emulator's JSON, through the protocol's parser), then
/// `FindRequest.parse` (query, omit, criteria, offset, limit, sort, portal, offset.<portal>,
/// limit.<portal>), then every criterion's `matches` on the seed's kinds of stored values.
/// FindRequest.swift, FindCriterion.swift and JSON.swift are the emulator's own files, linked
/// into this target (see README.md). Input: the body's bytes.
///
/// Properties:
/// - an accepted body is well-formed: a request or more, every criterion and sort key on a
///   field of the layout, offsets and limits ≥ 1, portals the layout's, each once;
/// - it re-encodes (the emulator's JSON writer) to a body that parses to the same find;
/// - the body re-serialised by the emulator's writer parses to the same JSON;
/// - `FindCriterion.wildcard` (one pass) agrees with a dynamic-programming matcher on every
///   pattern and word `matches` hands it, for patterns of up to 64 characters (longer ones
///   only cost time);
/// - a refusal names what was wrong: 1710 only for bytes that are not JSON; 102 only for a
///   criterion or sort field the body names and the layout lacks; 1708 names the parameter, and
///   the criterion or portal it quotes is one the body holds.
func fuzzFind(_ data: Data) {
    let find: FindRequest
    do throws(DataAPIError) {
        find = try FindRequest.parse(body: data, layout: Fixture.layout)
    } catch {
        checkRefusal(error, data)
        return
    }
    guard let body = JSON.parse(data.isEmpty ? Data("{}".utf8) : data) else {
        fuzzCheck(false, "a body that is not JSON was accepted")
        return
    }
    fuzzCheck(JSON.parse(body.data) == body, "the body does not survive the emulator's JSON writer")

    fuzzCheck(!find.requests.isEmpty, "a find without requests was accepted")
    for request in find.requests {
        for criterion in request.criteria {
            fuzzCheck(Fixture.fields.contains(criterion.field), "criterion on \(criterion.field), not a stored field name")
            for value in Fixture.storedValues {
                _ = criterion.criterion.matches(value)
                checkWildcards(criterion.criterion, value)
            }
        }
    }
    fuzzCheck(find.sort.allSatisfy { Fixture.fields.contains($0.field) }, "sort on a field that is not a stored field name")
    fuzzCheck(find.start >= 1 && find.count >= 1, "offset or limit below 1 accepted")
    fuzzCheck(find.portals.allSatisfy { Fixture.portals.contains($0.name) && $0.start >= 1 && $0.count >= 1 }, "bad portal accepted")
    fuzzCheck(Set(find.portals.map(\.name)).count == find.portals.count, "a portal shown twice")

    let again: FindRequest
    do throws(DataAPIError) {
        again = try FindRequest.parse(body: encode(find).data, layout: Fixture.layout)
    } catch {
        fuzzCheck(false, "the re-encoded find is refused: \(error)")
        return
    }
    fuzzCheck(normalized(again) == normalized(find), "the find does not survive being re-encoded")
}

/// What the finds run against. Static (lazily set): top-level constants of main.swift after
/// `runFuzzer()` would never be initialised.
enum Fixture {
    static let tableName = "CheckIns"
    /// The seed's CheckIns and Participants fields, on one layout.
    static let fields: Set<String> = [
        "CheckInID", "EventID", "ParticipantID", "FirstName", "LastName", "Shelter", "Bed", "CheckedInAt", "Notes", "Photo", "Created",
        "CurrentShift", "DateOfBirth", "CaseNumber",
    ]
    static let portals = ["CheckIns", "Staff"]
    static var layout: FindLayout { FindLayout(name: "CheckIns", field: field, portals: portals) }

    /// `FileMakerModel.Table.field`: the field's stored name, for its name or `Table::name`.
    static func field(_ name: String) -> String? {
        if let index = fields.firstIndex(of: name) { return fields[index] }
        if let range = name.range(of: "::"), name[..<range.lowerBound] == tableName,
            let index = fields.firstIndex(of: String(name[range.upperBound...]))
        {
            return fields[index]
        }
        return nil
    }

    /// Values of the kinds the seed stores (text, numbers, `MM/dd/yyyy` dates and timestamps,
    /// ids, empty) and a few more, for `FindCriterion.matches`.
    static let storedValues = [
        "", "1000", "-3.5", "0190a1b2-0000-7000-8000-000000000000", "M@rcus", "Riverside Emergency Shelter", "11/01/2026 21:10:00",
        "01/01/1960", "Zoë O'Brien-Smith, bed 10",
    ]
}

/// Compares `FindCriterion.wildcard` with `referenceWildcard` on the calls `matches` makes.
func checkWildcards(_ criterion: FindCriterion, _ value: String) {
    let calls: [(String, String, Bool)]
    switch criterion {
    case .whole(let pattern): calls = [(pattern.lowercased(), value.lowercased(), false)]
    case .word(let pattern): calls = FindCriterion.words(of: value).map { (pattern.lowercased(), $0, false) }
    case .words(let patterns):
        let words = FindCriterion.words(of: value)
        calls = patterns.flatMap { pattern in words.map { (pattern, $0, true) } }
    default: calls = []
    }
    for (pattern, text, prefix) in calls where pattern.count <= 64 {
        let fast = FindCriterion.wildcard(pattern, text, prefix: prefix)
        fuzzCheck(
            fast == referenceWildcard(pattern, text, prefix: prefix),
            "wildcard(\(pattern.debugDescription), \(text.debugDescription), prefix: \(prefix)) is \(fast)")
    }
}

/// `*` any characters, `@` one, `#` one digit, others themselves; the whole text, or its
/// beginning with `prefix`. By dynamic programming over (pattern, text) prefixes.
func referenceWildcard(_ pattern: String, _ text: String, prefix: Bool) -> Bool {
    let t = Array(text)
    // matched[j]: the pattern so far matches t[..<j].
    var matched = [true] + [Bool](repeating: false, count: t.count)
    for character in pattern {
        var next = [Bool](repeating: false, count: t.count + 1)
        for j in 0...t.count {
            switch character {
            case "*": next[j] = matched[j] || (j > 0 && next[j - 1])
            case "@": next[j] = j > 0 && matched[j - 1]
            case "#": next[j] = j > 0 && matched[j - 1] && t[j - 1].isNumber
            default: next[j] = j > 0 && matched[j - 1] && t[j - 1] == character
            }
        }
        matched = next
    }
    return prefix ? matched.contains(true) : matched[t.count]
}

/// A body that asks for `find`: every parameter written out, criteria on their stored names
/// (`Table::Field` for a second criterion on one field: a JSON object has each key once).
func encode(_ find: FindRequest) -> JSON {
    var query: [JSON] = []
    for request in find.requests {
        var members: [(String, JSON)] = []
        var used: Set<String> = []
        for criterion in request.criteria {
            let key = used.insert(criterion.field).inserted ? criterion.field : "\(Fixture.tableName)::\(criterion.field)"
            members.append((key, .string(criterion.text)))
        }
        if request.omit { members.append(("omit", "true")) }
        query.append(.object(members))
    }
    var body: [(String, JSON)] = [
        ("query", .array(query)), ("offset", .int(Int64(find.start))), ("limit", .int(Int64(find.count))),
        ("sort", .array(find.sort.map { ["fieldName": .string($0.field), "sortOrder": $0.ascending ? "ascend" : "descend"] })),
        ("portal", .array(find.portals.map { .string($0.name) })),
    ]
    for portal in find.portals {
        body.append(("offset.\(portal.name)", .int(Int64(portal.start))))
        body.append(("limit.\(portal.name)", .int(Int64(portal.count))))
    }
    return .object(body)
}

/// The criteria of one request hold together, in any order.
func normalized(_ find: FindRequest) -> FindRequest {
    var find = find
    for index in find.requests.indices {
        find.requests[index].criteria.sort { ($0.field, $0.text) < ($1.field, $1.text) }
    }
    return find
}

/// Checks that a refusal names what was wrong (see `fuzzFind`).
func checkRefusal(_ error: DataAPIError, _ data: Data) {
    let body = data.isEmpty ? JSON.object([]) : JSON.parse(data)
    switch error {
    case .invalidJSON:
        fuzzCheck(body == nil, "1710 for a body that is JSON")
    case .fieldMissing(let name):
        let named = criterionNames(body) + (body?["sort"]?.elements ?? []).compactMap { $0["fieldName"]?.string }
        fuzzCheck(named.contains(name) && Fixture.field(name) == nil, "102 for \(name), a field the body does not name or the layout has")
    case .invalidParameter(let detail):
        fuzzCheck(body != nil, "1708 for a body that is not JSON")
        let parameters = [
            "the body ", "query ", "each find request ", "omit ", "offset", "limit", "sort ", "each sort ", "sortOrder ", "portal ",
        ]
        if detail.hasPrefix("find criterion ") {
            let quoted = criterionNames(body).contains { detail.hasPrefix("find criterion \($0) must be") }
            fuzzCheck(quoted, "1708 names a criterion the body does not hold: \(detail)")
        } else if detail.hasPrefix("layout \(Fixture.layout.name) has no portal ") {
            let name = String(detail.dropFirst("layout \(Fixture.layout.name) has no portal ".count))
            let selected = (body?["portal"]?.elements ?? []).compactMap(\.string)
            let parameter = (body?.members ?? []).contains { $0.0 == "offset.\(name)" || $0.0 == "limit.\(name)" }
            fuzzCheck(
                (selected.contains(name) || parameter) && !Fixture.portals.contains(name),
                "1708 names a portal the body does not ask for, or one the layout has: \(detail)")
        } else {
            fuzzCheck(parameters.contains { detail.hasPrefix($0) }, "1708 names no parameter: \(detail)")
        }
    }
}

/// Every key of every object of `query`, but `omit`.
func criterionNames(_ body: JSON?) -> [String] {
    (body?["query"]?.elements ?? []).flatMap { $0.members ?? [] }.map(\.0).filter { $0 != "omit" }
}

@_cdecl("LLVMFuzzerTestOneInput")
func testOneInput(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    fuzzFind(FuzzInput.data(start, count))
    return 0
}
