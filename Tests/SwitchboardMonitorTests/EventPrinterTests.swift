import Foundation
import SwitchboardMonitor
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite struct EventPrinterTests {
    let checkIn = followed(7, content: Events.checkIn())

    @Test("a check-in's line shows its summary without the person unless asked")
    func checkInLine() {
        let hidden = EventPrinter(json: false, showingPersonalData: false).line(for: checkIn, today: "2026-11-22")
        #expect(hidden == "#7  checkin.recorded  riverside-1  made 21:04:00.123  participant at site 12 program 3 via riverside-1")
        for value in ["Ana", "Diaz", "1990-04-01"] { #expect(!hidden.contains(value), "\(hidden)") }
        let shown = EventPrinter(json: false, showingPersonalData: true).line(for: checkIn, today: "2026-11-22")
        #expect(shown.contains("Ana D. at site 12"), "\(shown)")
        #expect(!shown.contains("1990-04-01"), "a summary never carries the date of birth: \(shown)")
    }

    @Test("another event's line is its content, redacted, identifiers first, and says when it came from the journal")
    func otherContent() {
        let event = followed(
            9, type: "filemaker.record.written", producer: "filemaker-worker", schema: "filemaker.record.written/1",
            content: json(#"{"zone":"east","record_id":"42","first_name":"Ana","api_token":"abc","bus_seq":3}"#), fromJournal: true)
        let line = EventPrinter(json: false, showingPersonalData: false).line(for: event, today: "2026-11-23")
        #expect(
            line
                == #"#9  filemaker.record.written  filemaker-worker  made 2026-11-22 21:04:00.123  {"record_id":"42","bus_seq":3,"api_token":"[redacted]","first_name":"[personal]","zone":"east"} (journal)"#
        )
    }

    @Test("a long content is cut at the limit and says where to see all of it")
    func longContent() {
        let event = followed(1, type: "x.y", schema: "x.y/1", content: json(#"{"text":"\#(String(repeating: "a", count: 3000))"}"#))
        let line = EventPrinter(json: false, showingPersonalData: false).line(for: event)
        #expect(line.hasSuffix("… (--json shows all)"))
        #expect(line.count < 2100)
    }

    @Test("--json prints one object per event, the content redacted, the summary beside it")
    func jsonLine() throws {
        let line = EventPrinter(json: true, showingPersonalData: false).line(for: checkIn)
        let fields = try object(json(line))
        #expect(fields["bus_seq"] as? Int == 7)
        #expect(fields["type"] as? String == "checkin.recorded")
        #expect(fields["source"] as? String == "live")
        #expect(fields["summary"] as? String == "participant at site 12 program 3 via riverside-1")
        let content = try #require(fields["content"] as? [String: Any])
        let participant = try #require(content["participant"] as? [String: Any])
        #expect(participant["first_name"] as? String == "[personal]")
        #expect(participant["date_of_birth"] as? String == "[personal]")
        #expect(!line.contains("Ana") && !line.contains("1990-04-01"), "\(line)")
    }

    @Test("notices: a -- line, or with --json an object naming the kind")
    func notices() throws {
        #expect(EventPrinter(json: false, showingPersonalData: false).noticeLine("gap", kind: "gap", fields: ["from": 3]) == "-- gap")
        let fields = try object(
            json(EventPrinter(json: true, showingPersonalData: false).noticeLine("gap", kind: "gap", fields: ["from": 3])))
        #expect(fields["notice"] as? String == "gap")
        #expect(fields["message"] as? String == "gap")
        #expect(fields["from"] as? Int == 3)
    }

    @Test("made: today's events show the clock, older ones the date too, odd times as they are")
    func madeAt() {
        #expect(EventPrinter.madeAt("2026-11-22T21:04:00.123Z", today: "2026-11-22") == "21:04:00.123")
        #expect(EventPrinter.madeAt("2026-11-21T21:04:00.123Z", today: "2026-11-22") == "2026-11-21 21:04:00.123")
        #expect(EventPrinter.madeAt("yesterday", today: "2026-11-22") == "yesterday")
    }
}
