// Growth (issue 30, item 6): durable ingest into a journal that already holds millions of events,
// against the same load into an empty one, in the same run; the broker's memory at both.
//
//   SWITCHBOARD_BENCH=1 swift run -c release switchboard-bench --growth [N] [--quick]
//
// The full journal is made once: the real broker creates its file and journals a few events,
// then N more rows are written straight into its `events` table with SQLite (one transaction,
// rows shaped as the broker stores them: the stored header with its `bus_seq`, a check-in's
// content, four producers with dense `producer_seq`s, UUIDv7 event ids in time order). Ingesting
// 10 M events through the broker would take minutes and 7 GB of pre-built frames; what the
// broker's ingest meets (the B-tree depth of the table and of both unique indexes, the file's
// size against the page cache, the start-up reads) is the same. The two brokers then take turns,
// three rounds each, with the same 4 producers × window 1000 as the main bench.

import Foundation
import GRDBSQLite
import SwitchboardProtocol
import SwitchboardRuntime
import SwitchboardTesting

func growthBench(count: Int, quick: Bool) async throws {
    let perRound = quick ? 40_000 : 200_000
    print(
        "Switchboard growth benchmark, \(Timestamp.now()), \(ProcessInfo.processInfo.activeProcessorCount) cores: ingest into an empty journal and into one with \(count) events\n"
    )
    let directory = try TemporaryDirectory("bench-growth")
    defer { directory.remove() }
    let empty = directory.path("empty")
    let full = directory.path("full")

    // The full journal: created and migrated by the broker, a few real events in it, then filled.
    var broker = try await BrokerProcess.start(directory: full)
    _ = try await ingest(broker: broker.endpoints, producers: 1, perProducer: 4, window: 4, prefix: "seed-real")
    await broker.stop()
    let journal = (full as NSString).appendingPathComponent("journal.sqlite")
    let filled = ContinuousClock.now
    try fillJournal(at: journal, count: count)
    let fillSeconds = seconds(filled.duration(to: .now))
    let fileBytes = (try? FileManager.default.attributesOfItem(atPath: journal)[.size] as? Int) ?? 0
    print(
        String(
            format: "filled: %d rows in %.1f s (%.0f rows/s), journal file %.2f GB", count, fillSeconds, Double(count) / fillSeconds,
            Double(fileBytes) / 1e9))

    struct Round {
        var startSeconds: Double
        var rssStartMB: Int
        var measured: Measured
        var rssEndMB: Int
    }
    var rounds: [String: [Round]] = ["empty": [], "full": []]
    for round in 0..<3 {
        for (name, path) in [("empty", empty), ("full", full)] {
            try? FileManager.default.removeItem(atPath: (path as NSString).appendingPathComponent("endpoints.json"))
            let started = ContinuousClock.now
            broker = try await BrokerProcess.start(directory: path)
            let startSeconds = seconds(started.duration(to: .now))
            let rssStart = broker.rssKilobytes() / 1024
            let measured = try await ingest(
                broker: broker.endpoints, producers: 4, perProducer: perRound / 4, window: 1000, prefix: "g\(round)")
            let rssEnd = broker.rssKilobytes() / 1024
            await broker.stop()
            rounds[name, default: []].append(Round(startSeconds: startSeconds, rssStartMB: rssStart, measured: measured, rssEndMB: rssEnd))
            print(
                String(
                    format: "round %d, %@: start %.1f s, RSS %d MB → %d MB, ingest %.0f/s", round + 1, name as NSString, startSeconds,
                    rssStart, rssEnd, measured.perSecond))
        }
    }
    func best(_ name: String) -> Double { rounds[name, default: []].map(\.measured.perSecond).max() ?? 0 }
    func median(_ name: String) -> Double {
        let sorted = rounds[name, default: []].map(\.measured.perSecond).sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }
    let fullRounds = rounds["full", default: []]
    print("\n| measurement | empty journal | \(count) events | ratio |\n|---|---|---|---|")
    print(
        String(
            format: "| ingest, 4 producers × window 1000, best of 3 | %.0f/s | %.0f/s | %.2f× |", best("empty"), best("full"),
            best("full") / best("empty")))
    print(
        String(
            format: "| the same, median of 3 | %.0f/s | %.0f/s | %.2f× |", median("empty"), median("full"),
            median("full") / median("empty")))
    print(
        "| broker RSS at start, largest | \(rounds["empty", default: []].map(\.rssStartMB).max() ?? 0) MB | \(fullRounds.map(\.rssStartMB).max() ?? 0) MB | |"
    )
    print(
        "| broker RSS after \(perRound) more, largest | \(rounds["empty", default: []].map(\.rssEndMB).max() ?? 0) MB | \(fullRounds.map(\.rssEndMB).max() ?? 0) MB | |"
    )
    print(
        String(
            format: "| broker start (process start to endpoints written), slowest | %.1f s | %.1f s | |",
            rounds["empty", default: []].map(\.startSeconds).max() ?? 0, fullRounds.map(\.startSeconds).max() ?? 0))
}

/// Appends `count` rows to the broker's `events` table after its highest `bus_seq`, in one
/// transaction, shaped as the broker stores them (see the file's comment).
private func fillJournal(at path: String, count: Int) throws {
    var handle: OpaquePointer?
    guard sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK, let db = handle else {
        throw BenchFailure(description: "cannot open \(path)")
    }
    defer { sqlite3_close(db) }
    func run(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(db, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            throw BenchFailure(description: "fill: \(text)")
        }
    }
    let content = String(decoding: Sample.content, as: UTF8.self).replacingOccurrences(of: "'", with: "''")
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    // A fill, not the broker's own writes: no fsync per step; the broker's file settings
    // (WAL) are left as they were.
    try run("PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;")
    try run("BEGIN")
    try run(
        """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(count)),
        base(head) AS (SELECT COALESCE(MAX(bus_seq), 0) FROM events),
        rows AS (
            SELECT head + i AS seq,
                printf('%08x-%04x-7%03x-8%03x-%012x', (\(now) - \(count) + i) >> 16, (\(now) - \(count) + i) & 65535,
                       i & 4095, i & 4095, i) AS id,
                'seed-' || (i % 4) AS producer, i / 4 + 1 AS pseq, \(now) - \(count) + i AS received
            FROM n, base
        ),
        stored AS (
            SELECT seq, id, producer, pseq, received,
                CAST('{"bus_seq":' || seq || ',"event_id":"' || id || '","producer":"' || producer || '","producer_seq":' || pseq
                     || ',"schema":"checkin.recorded/1","session":"bench","time":"2026-11-22T21:04:00.120Z","type":"checkin.recorded"}'
                     AS BLOB) AS header
            FROM rows
        )
        INSERT INTO events (bus_seq, event_id, producer, producer_seq, type, received_at, size, header, parent, metadata, content)
        SELECT seq, id, producer, pseq, 'checkin.recorded', received, length(header) + 4 + \(Sample.content.count), header,
            CAST('{}' AS BLOB), CAST('{}' AS BLOB), CAST('\(content)' AS BLOB)
        FROM stored
        """)
    try run("COMMIT")
}
