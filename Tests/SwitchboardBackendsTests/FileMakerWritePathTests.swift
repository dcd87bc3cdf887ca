import Foundation
import SwitchboardHTTP
import SwitchboardTesting
import Testing

@testable import SwitchboardBackends

/// A create's body and answer, written and read without Codable (a writer makes one with every
/// check-in), give what the Codable path gives.
@Suite("FileMaker: the create path without Codable")
struct FileMakerWritePathTests {
    static func value(_ random: inout SeededGenerator) -> FileMaker.FieldValue {
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return .number(Double(Int64.random(in: -1_000_000_000...1_000_000_000, using: &random)))
        case 1: return .number(Double.random(in: -1e6...1e6, using: &random))
        case 2: return .number([0.1, 1e-7, 123.456, -0.0, 1e20, 9.007199254740993e15].randomElement(using: &random)!)
        default:
            let pieces = ["a", " ", "\"", "\\", "/", "é", "名", "🙂", "\n", "\t", "\u{08}", "\u{0C}", "\u{01}", "\u{2028}"]
            return .text((0..<Int.random(in: 0...20, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined())
        }
    }

    @Test("the body reads back as the field data, in JSON the Codable body would equal")
    func body() throws {
        var random = SeededGenerator(seed: 301)
        for _ in 0..<1_000 {
            var fields: [String: FileMaker.FieldValue] = [:]
            for index in 0..<Int.random(in: 0...12, using: &random) {
                fields["Field \(index) \(["", "é", "\"q\"", "a/b", "名"].randomElement(using: &random)!)"] = Self.value(&random)
            }
            let body = try #require(FileMakerClient.fieldDataBody(fields))
            struct Body: Codable, Equatable { var fieldData: [String: FileMaker.FieldValue] }
            let read = try JSONDecoder().decode(Body.self, from: body)
            #expect(read == Body(fieldData: fields))
            // The same JSON value as the Codable encoding's.
            let codable = try JSONEncoder().encode(Body(fieldData: fields))
            #expect(
                try JSONSerialization.jsonObject(with: body) as? NSDictionary == JSONSerialization.jsonObject(with: codable)
                    as? NSDictionary)
        }
        // A number JSON cannot hold is left to the Codable encoding, which refuses it.
        #expect(FileMakerClient.fieldDataBody(["N": .number(.nan)]) == nil)
        #expect(FileMakerClient.fieldDataBody(["N": .number(.infinity)]) == nil)
    }

    static func response(_ status: Int, _ body: String) -> HTTPResponse {
        HTTPResponse(
            status: status, body: Data(body.utf8),
            context: HTTPError.Context(api: .fileMaker, operation: "records.create", method: "POST", redactedURL: "https://fm/records"))
    }

    @Test("the answer is read when it is a plain success, and left to the Codable reader otherwise")
    func answer() {
        let ok = #"{"response":{"recordId":"12","modId":"0"},"messages":[{"code":"0","message":"OK"}]}"#
        #expect(FileMakerClient.createdReference(Self.response(200, ok)) == FileMaker.RecordReference(recordId: "12", modId: "0"))
        let numbers = #"{"response":{"recordId":12,"modId":3},"messages":[{"code":0,"message":"OK"}]}"#
        #expect(FileMakerClient.createdReference(Self.response(200, numbers)) == FileMaker.RecordReference(recordId: "12", modId: "3"))
        for (status, body) in [
            (500, #"{"response":{},"messages":[{"code":"504","message":"Value in field is not unique"}]}"#),
            (200, #"{"response":{"recordId":"12","modId":"0"},"messages":[{"code":"401","message":"No records match"}]}"#),
            (200, #"{"response":{"recordId":"12","modId":"0"},"messages":[{"message":"OK"}]}"#),
            (200, #"{"response":{"recordId":"12"},"messages":[{"code":"0"}]}"#),
            (200, #"{"response":{"recordId":1.5,"modId":"0"},"messages":[{"code":"0"}]}"#),
            (200, #"{"response":{"recordId":"12","modId":"0"},"messages":{"code":"0"}}"#),
            (200, "<html>"),
            (200, ""),
        ] {
            #expect(FileMakerClient.createdReference(Self.response(status, body)) == nil, "\(status) \(body)")
        }
    }

    @Test("creates through the emulator keep every kind of value, and a refused create still throws FileMaker's error")
    func throughTheEmulator() async throws {
        try await withHarness { h async throws in
            let (fm, auth) = try await h.fileMakerSession()
            let fields: [String: FileMaker.FieldValue] = [
                "EventID": .text("write-path-1"), "ParticipantID": 1000, "Bed": .text("Bed \"7\" / north\né"),
            ]
            let created = try await fm.create(layout: "CheckIns", fieldData: fields, auth: auth)
            let record = try await fm.record(layout: "CheckIns", id: created.recordId, auth: auth)
            #expect(record.modId == created.modId)
            #expect(record["EventID"] == "write-path-1" && record["ParticipantID"] == 1000 && record["Bed"] == fields["Bed"])
            // The event id is unique on this layout: FileMaker answers 504 and the call throws it.
            let error = await #expect(throws: HTTPError.self) { try await fm.create(layout: "CheckIns", fieldData: fields, auth: auth) }
            #expect(error?.vendorCode == "504")
        }
    }
}
