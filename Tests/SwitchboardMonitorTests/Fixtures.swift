import Foundation
import SwitchboardProtocol
import Testing

@testable import SwitchboardBus

/// An event as a follower would deliver it, made without a broker.
func followed(
    _ busSeq: Int64, type: String = CheckIn.type, producer: String = "riverside-1", time: String = "2026-11-22T21:04:00.123Z",
    schema: String = CheckIn.schema, content: Data, fromJournal: Bool = false
) -> FollowedEvent {
    FollowedEvent(
        busSeq: busSeq,
        header: EventHeader(type: type, producer: producer, producerSeq: busSeq, time: time, schema: schema, session: "test"),
        content: content, fromJournal: fromJournal)
}

func json(_ text: String) -> Data { Data(text.utf8) }

/// A JSON document as a dictionary, for looking into snapshots and lines.
func object(_ data: Data) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}
