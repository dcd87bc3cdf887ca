import Foundation
import SwitchboardProtocol
import Testing

/// Operators' requests (protocol/README.md, 15.6) as types: each one's content reads back as
/// the same request, and a refused content names its field.
@Suite("Group administration requests")
struct GroupAdminRequestTests {
    static let requests: [GroupAdminRequest] = [
        .listGroups, .listProducers,
        .createGroup(group: "filemaker", topics: ["checkin.", "person."], start: nil),
        .createGroup(group: "eto", topics: ["checkin."], start: .sequence(42)),
        .resetGroup(group: "eto", start: .head), .resetGroup(group: "eto", start: nil), .deleteGroup(group: "eto"),
        .listDeadLetters(DeadLetterQuery()),
        .listDeadLetters(DeadLetterQuery(group: "eto", state: nil, limit: 1000, newest: true, after: "1:2:eto")),
        .showDeadLetter(group: "eto", busSeq: 7),
        .replayDeadLetters(group: "eto", .busSeq(7)), .replayDeadLetters(group: "eto", .all),
        .dropDeadLetters(group: "eto", .matching(code: "bad-data", before: "2026-11-22T21:04:00.120Z", limit: 500)),
    ]

    @Test("every request's content reads back as the same request", arguments: requests)
    func roundTrip(_ request: GroupAdminRequest) throws {
        guard case .object(let fields) = request.content else {
            Issue.record("content is not an object")
            return
        }
        #expect(try GroupAdminRequest(request.operation, content: fields) == request)
    }

    @Test("the nine operation names, and which only read or change")
    func operations() {
        #expect(
            GroupOperation.allCases.map(\.rawValue) == [
                "groups.list", "groups.create", "groups.reset", "groups.delete", "dlq.list", "dlq.show", "dlq.replay", "dlq.drop",
                "producers.list",
            ])
        #expect(GroupOperation.allCases.filter(\.onlyReads) == [.listGroups, .listDeadLetters, .listProducers])
        #expect(
            GroupOperation.allCases.filter(\.changes) == [.createGroup, .resetGroup, .deleteGroup, .replayDeadLetters, .dropDeadLetters])
    }

    @Test(
        "a refused content names its field",
        arguments: [
            (GroupOperation.createGroup, #"{"topics":["a."]}"#, "content: field 'group' is required"),
            (
                .createGroup, #"{"group":"Eto","topics":["a."]}"#,
                "content: field 'group' must be 1–64 of a–z 0–9 _ - starting with a letter"
            ),
            (.createGroup, #"{"group":"eto","topics":[]}"#, "content: field 'topics' must hold 1–32 prefixes, got 0"),
            (.resetGroup, #"{"group":"eto","start":0}"#, #"content: field 'start' must be "earliest", "head" or a bus_seq from 1 to 2^53"#),
            (.showDeadLetter, #"{"group":"eto"}"#, "content: field 'bus_seq' is required"),
            (.showDeadLetter, #"{"group":"eto","bus_seq":0}"#, "content: field 'bus_seq' must be at least 1, got 0"),
            (.listDeadLetters, #"{"limit":1001}"#, "content: field 'limit' must be an integer from 1 to 1000"),
            (.listDeadLetters, #"{"state":"gone"}"#, "content: field 'state' must be dead, replayed, dropped or all"),
            (.listDeadLetters, #"{"order":"random"}"#, "content: field 'order' must be oldest or newest"),
            (.replayDeadLetters, #"{"group":"eto"}"#, #"content: give either 'bus_seq' or "all": true"#),
            (.dropDeadLetters, #"{"group":"eto","bus_seq":3,"all":true}"#, #"content: give either 'bus_seq' or "all": true"#),
            (
                .dropDeadLetters, #"{"group":"eto","bus_seq":3,"limit":3}"#,
                #"content: 'code', 'before' and 'limit' go with "all": true, not with 'bus_seq'"#
            ),
            (.dropDeadLetters, #"{"group":"eto","all":true,"before":"yesterday"}"#, "content: field 'before' must be an RFC 3339 time"),
            (.replayDeadLetters, #"{"group":"eto","all":true,"limit":10001}"#, "content: field 'limit' must be an integer from 1 to 10000"),
        ])
    func refused(_ operation: GroupOperation, _ content: String, _ message: String) throws {
        let fields = try #require(JSONValue.parse(Data(content.utf8))?.object)
        let error = #expect(throws: ProtocolError.self) { try GroupAdminRequest(operation, content: fields) }
        #expect(error?.message == message)
        #expect(error?.code == .schemaViolation)
    }

    @Test("results decode from what the broker writes; dlq.show's record and event sit side by side")
    func detail() throws {
        let letter = DeadLetterInfo(
            group: "eto", busSeq: 7, eventID: "0193a5f2-8d01-7c2e-9a4b-2f6e8d0c1a33", type: "checkin.recorded", attempts: 5,
            code: "bad-data",
            message: "no", at: "2026-11-22T21:04:00.120Z", state: .dead, dlqSeq: 9)
        let detail = DeadLetterDetail(letter: letter, eventHeader: Data(#"{"bus_seq":7}"#.utf8), eventContent: Data(#"{"n":1}"#.utf8))
        let data = try WireJSON.encode(detail)
        let object = try #require(JSONValue.parse(data)?.object)
        #expect(
            object["bus_seq"] == .integer(7)
                && object["event"] == .object(["header": .object(["bus_seq": .integer(7)]), "content": .object(["n": .integer(1)])]))
        #expect(try JSONDecoder().decode(DeadLetterDetail.self, from: data) == detail)
        let bare = DeadLetterDetail(letter: letter)
        #expect(try JSONDecoder().decode(DeadLetterDetail.self, from: try WireJSON.encode(bare)) == bare)
    }
}
