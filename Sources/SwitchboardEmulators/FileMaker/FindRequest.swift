import Foundation

// What a Data API `_find` body asks for, checked against the layout, before any record is read.
// Pure: this file uses only `JSON` (Support/JSON.swift) and `FindCriterion` (FindCriterion.swift).
// bench/fuzz compiles these three files on their own (fuzz target `findparser`), without the
// HTTP server: keep them free of the emulator's other types.

/// A refusal a Data API request's body or parameters earn before any record is read.
enum DataAPIError: Error, Equatable {
    /// 1710 (HTTP 400): the body is not JSON.
    case invalidJSON
    /// 1708 (HTTP 400): a parameter's value is invalid; the text names the parameter and why.
    case invalidParameter(String)
    /// 102 (HTTP 500): the layout's table has no field of this name (as the request wrote it).
    case fieldMissing(String)
}

/// What a find needs to know of its layout.
struct FindLayout {
    var name: String
    /// The stored name of a field of the layout's table (`Table::Field` allowed); nil when the
    /// table has no such field.
    var field: (String) -> String?
    /// The layout's portals, in layout order.
    var portals: [String]
}

/// A `POST …/layouts/{layout}/_find` body: `query` (a list of find requests: objects of field
/// criteria, and `omit`), `sort`, `offset`, `limit`, `portal`, `offset.<portal>`,
/// `limit.<portal>`. Checks run in that order and the first failure is the answer.
struct FindRequest: Equatable {
    struct Criterion: Equatable {
        /// The field's stored name.
        var field: String
        /// The criterion as the request wrote it (a number as its text).
        var text: String
        var criterion: FindCriterion

        init(field: String, text: String) {
            self.field = field
            self.text = text
            criterion = FindCriterion(text)
        }
    }

    /// One object of `query`: every criterion must hold; an omit request takes its matches out
    /// of the found set instead of adding them.
    struct Request: Equatable {
        var criteria: [Criterion]
        var omit: Bool
    }

    struct SortKey: Equatable {
        var field: String
        var ascending: Bool
    }

    /// The related rows one portal shows: 1-based `start`, at most `count`.
    struct Portal: Equatable {
        var name: String
        var start: Int
        var count: Int
    }

    var requests: [Request]
    /// 1-based.
    var start: Int
    var count: Int
    var sort: [SortKey]
    var portals: [Portal]

    /// Records a found set shows when the request names no `limit`.
    static let defaultLimit = 100
    /// Rows a portal shows when the request names no `limit.<portal>`.
    static let defaultPortalLimit = 50

    /// A find body's bytes as the emulator reads them (`JSON.body`, then the body).
    static func parse(body: Data, layout: FindLayout) throws(DataAPIError) -> FindRequest {
        try parse(body: JSON.body(body), layout: layout)
    }

    static func parse(body: JSON, layout: FindLayout) throws(DataAPIError) -> FindRequest {
        guard let items = body["query"]?.elements, !items.isEmpty else {
            throw .invalidParameter("query must be a non-empty list of find requests")
        }
        var requests: [Request] = []
        for item in items {
            guard let members = item.members else { throw .invalidParameter("each find request must be an object") }
            var request = Request(criteria: [], omit: false)
            for (name, value) in members {
                if name == "omit" {
                    guard let text = value.text?.lowercased(), text == "true" || text == "false" else {
                        throw .invalidParameter("omit must be \"true\" or \"false\"")
                    }
                    request.omit = text == "true"
                    continue
                }
                guard let field = layout.field(name) else { throw .fieldMissing(name) }
                guard let text = value.text else {
                    let kind = value == .null ? "null" : (value.elements != nil ? "a list" : "an object")
                    throw .invalidParameter("find criterion \(name) must be text or a number, not \(kind)")
                }
                request.criteria.append(Criterion(field: field, text: text))
            }
            requests.append(request)
        }
        let (start, count) = try window(offset: body["offset"], limit: body["limit"])
        let sort = try sortKeys(body["sort"], field: layout.field)
        // The portal parameters are body members: `portal` a list, `offset.<portal>` and
        // `limit.<portal>` text or numbers like `offset` and `limit`.
        var parameters: [String: JSON] = [:]
        for (key, value) in body.members ?? [] where key.hasPrefix("offset.") || key.hasPrefix("limit.") {
            parameters[key] = parameters[key] ?? value
        }
        let portals = try portals(layout, selection: body["portal"], parameters: parameters)
        return FindRequest(requests: requests, start: start, count: count, sort: sort, portals: portals)
    }

    /// A 1-based offset and a limit from query or body text or numbers. `name` tells a
    /// portal's parameters (`.CheckIns`, for `offset.CheckIns`) from the found set's.
    static func window(
        offset: JSON?, limit: JSON?, defaultLimit: Int = defaultLimit, name: String = ""
    ) throws(DataAPIError) -> (start: Int, count: Int) {
        var start = 1
        var count = defaultLimit
        if let offset {
            guard let value = offset.integer, value >= 1 else { throw .invalidParameter("offset\(name) must be a whole number ≥ 1") }
            start = value
        }
        if let limit {
            guard let value = limit.integer, value >= 1 else { throw .invalidParameter("limit\(name) must be a whole number ≥ 1") }
            count = value
        }
        return (start, count)
    }

    /// `sort`: a list of `{"fieldName", "sortOrder"}`, `sortOrder` `ascend` (the default) or
    /// `descend`.
    static func sortKeys(_ json: JSON?, field: (String) -> String?) throws(DataAPIError) -> [SortKey] {
        guard let json else { return [] }
        guard let items = json.elements else { throw .invalidParameter("sort must be a list") }
        var keys: [SortKey] = []
        for item in items {
            guard let name = item["fieldName"]?.string else { throw .invalidParameter("each sort needs a fieldName") }
            guard let stored = field(name) else { throw .fieldMissing(name) }
            let order = item["sortOrder"]?.string ?? "ascend"
            guard order == "ascend" || order == "descend" else { throw .invalidParameter("sortOrder must be ascend or descend") }
            keys.append(SortKey(field: stored, ascending: order == "ascend"))
        }
        return keys
    }

    /// The portals an answer shows: those `selection` names (a JSON list of portal names), or
    /// every portal of the layout without one; `parameters` holds the `offset.<portal>` and
    /// `limit.<portal>` values. A name the layout has no portal for is 1708, the first in
    /// name order.
    static func portals(_ layout: FindLayout, selection: JSON?, parameters: [String: JSON]) throws(DataAPIError) -> [Portal] {
        let declared = layout.portals
        var chosen = declared
        if let selection {
            guard let items = selection.elements else { throw .invalidParameter("portal must be a list of portal names") }
            chosen = []
            for item in items {
                guard let name = item.string else { throw .invalidParameter("portal must be a list of portal names") }
                guard declared.contains(name) else { throw .invalidParameter("layout \(layout.name) has no portal \(name)") }
                if !chosen.contains(name) { chosen.append(name) }
            }
        }
        for key in parameters.keys.sorted() {
            let name = key.hasPrefix("offset.") ? key.dropFirst("offset.".count) : key.dropFirst("limit.".count)
            guard declared.contains(String(name)) else { throw .invalidParameter("layout \(layout.name) has no portal \(name)") }
        }
        var portals: [Portal] = []
        for name in chosen {
            let (start, count) = try window(
                offset: parameters["offset.\(name)"], limit: parameters["limit.\(name)"], defaultLimit: defaultPortalLimit,
                name: ".\(name)")
            portals.append(Portal(name: name, start: start, count: count))
        }
        return portals
    }
}

extension JSON {
    /// A Data API request body: empty reads as `{}`; otherwise JSON (else 1710) holding an
    /// object (else 1708).
    static func body(_ data: Data) throws(DataAPIError) -> JSON {
        guard let json = JSON.parse(data.isEmpty ? Data("{}".utf8) : data) else { throw .invalidJSON }
        guard json.members != nil else { throw .invalidParameter("the body must be a JSON object") }
        return json
    }
}
