import Foundation
import SwitchboardBus
import SwitchboardMonitor
import SwitchboardProtocol
import SwitchboardTesting
import Testing

@Suite struct DashboardStateTests {
    /// 2026-11-22T21:05:00Z in Unix milliseconds.
    let now: Int64 = 1_795_381_500_000

    private func rates(_ snapshot: [String: Any]) -> [String: Double] {
        let rows = snapshot["rates"] as? [[String: Any]] ?? []
        return Dictionary(uniqueKeysWithValues: rows.map { ($0["type"] as? String ?? "", $0["per_second"] as? Double ?? -1) })
    }

    @Test("events raise the counts and the head; a rate is the difference over the seconds ticked")
    func countsAndRates() throws {
        let state = DashboardState()
        state.tick(now: now)
        for seq in 1...4 { state.record(followed(Int64(seq), content: Events.checkIn())) }
        state.tick(now: now + 1000)
        state.tick(now: now + 2000)
        let snapshot = try object(state.snapshot())
        #expect(snapshot["head"] as? Int == 4)
        #expect(rates(snapshot) == [CheckIn.type: 2])
        #expect(snapshot["updated"] as? String == "2026-11-22T21:05:02.000Z")
        let totals = (snapshot["rates"] as? [[String: Any]])?.first?["total"] as? Int
        #expect(totals == 4)
    }

    @Test("a kiosk's last check-in is kept, with how long ago, and no content of it")
    func kiosks() throws {
        let state = DashboardState()
        state.record(followed(1, time: "2026-11-22T21:04:48.000Z", content: Events.checkIn()))
        state.tick(now: now)
        let snapshot = try object(state.snapshot())
        let kiosks = try #require(snapshot["kiosks"] as? [[String: Any]])
        #expect(kiosks.count == 1)
        #expect(kiosks.first?["name"] as? String == "riverside-1")
        #expect(kiosks.first?["last_checkin"] as? String == "2026-11-22T21:04:48.000Z")
        #expect(kiosks.first?["last_checkin_ago"] as? String == "12 s ago")
        let text = String(decoding: state.snapshot(), as: UTF8.self)
        for value in ["Ana", "Diaz", "1990-04-01"] { #expect(!text.contains(value), "\(text)") }
    }

    @Test("refusals and dead letters become problems: kinds, codes and counts, never a dead letter's message")
    func problems() throws {
        let state = DashboardState()
        state.record(
            followed(
                1, type: "security.refused", producer: "broker", schema: "security.refused/1",
                content: json(#"{"kind":"curve","principal":"kiosk-9","reason":"unknown key"}"#)))
        state.record(
            followed(
                2, type: "dlq.filemaker-writer", producer: "broker", schema: "dlq/1",
                content: json(#"{"code":"validation","attempts":3,"bus_seq":41,"message":"Ana Diaz 1990-04-01 refused"}"#)))
        state.tick(now: now)
        let snapshot = try object(state.snapshot())
        let problems = try #require(snapshot["problems"] as? [[String: Any]])
        #expect(problems.map { $0["kind"] as? String } == ["dead letter", "refused: curve"])
        #expect(problems.first?["text"] as? String == "group filemaker-writer: #41 after 3 attempts, validation")
        #expect(problems.last?["text"] as? String == "kiosk-9 unknown key")
        let text = String(decoding: state.snapshot(), as: UTF8.self)
        #expect(!text.contains("Ana"), "\(text)")
    }

    @Test("only the last 20 problems are kept")
    func problemLimit() throws {
        let state = DashboardState()
        for seq in 1...25 {
            state.record(
                followed(
                    Int64(seq), type: "security.refused", producer: "broker", schema: "security.refused/1",
                    content: json(#"{"kind":"k\#(seq)"}"#)))
        }
        let problems = try #require(try object(state.snapshot())["problems"] as? [[String: Any]])
        #expect(problems.count == 20)
        #expect(problems.first?["kind"] as? String == "refused: k25")
    }

    @Test("the broker's tables: groups raise the head; a failed poll keeps the last tables and says why")
    func brokerTables() throws {
        let state = DashboardState()
        let group = try JSONDecoder().decode(
            GroupInfo.self,
            from: json(
                #"{"name":"filemaker-writer","topics":["checkin."],"start":"earliest","cursor":90,"head":100,"lag":10,"pending":1,"#
                    + #""waiting":0,"ready":9,"redeliveries":2,"dead_letters":{"dead":1,"replayed":0,"dropped":0},"members":[]}"#))
        state.broker(groups: [group], deadLetters: nil, producers: nil, services: nil, error: nil)
        state.broker(groups: nil, deadLetters: nil, producers: nil, services: nil, error: "groups: timed out")
        let snapshot = try object(state.snapshot())
        #expect(snapshot["head"] as? Int == 100)
        #expect(snapshot["broker_error"] as? String == "groups: timed out")
        let groups = try #require(snapshot["groups"] as? [[String: Any]])
        #expect(groups.first?["name"] as? String == "filemaker-writer")
        #expect(groups.first?["lag"] as? Int == 10)
        #expect(groups.first?["dead"] as? Int == 1)
    }
}
