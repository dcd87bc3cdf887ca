// The broker's durable state behind one interface: events and producer marks, consumer-group
// cursors and the rows beside them, dead letters and what operators did to them. Ingest,
// fan-out, replay and groups know only `JournalStore`; `Journal` keeps it in one SQLite file
// (the embedded default) and `PostgresJournalStore` in a PostgreSQL database (for a broker that
// must outlive its host, issue 29). Which one a broker opens is `journal.store`.

public import Foundation
import SwitchboardProtocol
import SwitchboardStorage

/// An event the ingest path has checked and wants journaled.
///
/// A class of constants: the broker thread reads each event in place, where a copy of a struct
/// would retain and release every string and buffer in it (made, and later freed, on the
/// ingest thread): 10–12 % of the broker thread at full ingest.
final class PendingEvent: Sendable {
    let header: EventHeader
    /// The header's parsed fields, kept only when the stored header must be written anew (see
    /// `Journal.storedHeader`); nil when it is the producer's bytes with `bus_seq` put first.
    /// (Made on the ingest thread, so the broker thread neither keeps nor frees the fields.)
    let rewrite: [String: JSONValue]?
    /// The header frame's bytes as received.
    let rawHeader: Data
    let parent: Data
    let metadata: Data
    let content: Data
    /// Broker clock, Unix milliseconds.
    let receivedAt: Int64
    /// The producer sent it as 1.1 or later: it reads ACKS, so it is answered in its commit's ACKS.
    let batchedAck: Bool

    /// - Parameter headerFields: the header as the producer sent it, unknown fields included:
    ///   the journal stores and forwards these with `bus_seq` added.
    convenience init(
        header: EventHeader, headerFields: [String: JSONValue], rawHeader: Data, parent: Data, metadata: Data, content: Data,
        receivedAt: Int64, batchedAck: Bool = false
    ) {
        self.init(
            header: header, rewrite: Journal.keepsProducerBytes(raw: rawHeader, fields: headerFields) ? nil : headerFields,
            rawHeader: rawHeader, parent: parent, metadata: metadata, content: content, receivedAt: receivedAt,
            batchedAck: batchedAck)
    }

    /// An event whose header the quick check read (`Envelope.quickPublishedEvent()`): it has no
    /// `bus_seq` and an integer `producer_seq`, so the journal keeps the producer's bytes.
    convenience init(quick envelope: Envelope, header: EventHeader, receivedAt: Int64) {
        self.init(
            header: header, rewrite: nil, rawHeader: envelope.header, parent: envelope.parent, metadata: envelope.metadata,
            content: envelope.content, receivedAt: receivedAt, batchedAck: envelope.version >= .batchedAcks)
    }

    private init(
        header: EventHeader, rewrite: [String: JSONValue]?, rawHeader: Data, parent: Data, metadata: Data, content: Data,
        receivedAt: Int64, batchedAck: Bool
    ) {
        self.header = header
        self.rewrite = rewrite
        self.rawHeader = rawHeader
        self.parent = parent
        self.metadata = metadata
        self.content = content
        self.receivedAt = receivedAt
        self.batchedAck = batchedAck
    }

    /// The header to journal and forward under `busSeq`.
    func storedHeader(busSeq: Int64) -> Data {
        if let rewrite { return Journal.rewrittenHeader(rewrite, busSeq: busSeq) }
        return Journal.prefixed(raw: rawHeader, busSeq: busSeq)
    }
}

/// What happened to one event of a batch.
enum AppendOutcome: Equatable {
    /// Journaled now under `busSeq`; `header` is the stored header (with `bus_seq`).
    case stored(busSeq: Int64, header: Data)
    /// Journaled before under `busSeq`.
    case duplicate(busSeq: Int64)
    /// The producer's sequence number already belongs to another event; `producerHead` is the
    /// highest sequence number the journal holds for that producer.
    case conflict(existingEventID: String, producerHead: Int64)
}

/// The events a batch has stored so far, so a later event of the same batch is answered as the
/// journal would answer it once committed: the same `event_id` is a duplicate, another event under
/// a producer's `producer_seq` a conflict. `PostgresJournalStore` looks its batch up in one query
/// and inserts it in one statement, so it asks this before its look-up's answers; SQLite inserts
/// row by row and its own look-up sees the rows of the open transaction.
struct BatchSeen {
    private var busSeqs: [String: Int64] = [:]
    private var eventIDs: [String: [Int64: String]] = [:]

    /// The answer for `header` if this batch already decided it; nil when the store must look.
    func outcome(for header: EventHeader, producerHead: Int64?) -> AppendOutcome? {
        if let seq = busSeqs[header.eventID] { return .duplicate(busSeq: seq) }
        if let other = eventIDs[header.producer]?[header.producerSeq] {
            return .conflict(existingEventID: other, producerHead: producerHead ?? header.producerSeq)
        }
        return nil
    }

    mutating func stored(_ header: EventHeader, busSeq: Int64) {
        busSeqs[header.eventID] = busSeq
        eventIDs[header.producer, default: [:]][header.producerSeq] = header.eventID
    }
}

struct JournalFailure: Error, CustomStringConvertible {
    var description: String
}

/// One journaled event as read back.
public struct JournaledEvent: Sendable, Hashable {
    public var busSeq: Int64
    public var type: String
    public var header: Data
    public var parent: Data
    public var metadata: Data
    public var content: Data
}

/// Everything the broker keeps durably, behind one interface.
///
/// **Threading contract.** A store is used by exactly one thread, the broker's loop, which
/// calls it synchronously: every method returns only when its work is done (a commit is durable,
/// a read has its rows). It is not `Sendable` and must not be shared. A store may block the
/// calling thread while it waits on its own I/O (`PostgresJournalStore` waits on an event loop
/// it owns), so it must never be called from an event-loop thread or from a task on Swift's
/// cooperative pool, where blocking starves everything else.
///
/// **Durability contract.** `commit(events:groups:)` applies a batch's events and the group
/// writes in one transaction that is durable on return: an event is ACKed only after that.
/// When it throws, nothing of the batch is applied and the in-memory view (`head`, `first`,
/// `count`, `storedBytes`) is unchanged; the error is a `StorageFault` whose cause the NACK
/// names (section 7, "Journal faults"). `bus_seq` is given out densely by the store inside the
/// transaction, one above `head`, and is never reused (not even after retention emptied the
/// journal, nor after a reopen).
///
/// **Failures.** No method crashes or hangs on a storage failure: a full disk, a lost
/// database connection or a server that refuses come out as a thrown `StorageFault`, and the
/// next call tries again (a store that lost its connection reconnects then).
protocol JournalStore: AnyObject {
    /// Where the state lives, for logs and faults: a file path, or a database named without its
    /// password (`postgresql://user@host:port/database`).
    var location: String { get }
    /// The journal's identity, made when its storage was created (`HEAD.broker`).
    var brokerID: String { get }
    /// The highest `bus_seq` ever given out (0: none).
    var head: Int64 { get }
    /// The lowest retained `bus_seq` (`head + 1` when nothing is retained).
    var first: Int64 { get }
    /// Sum of the retained events' stored frame sizes, for size-based retention.
    var storedBytes: Int64 { get }
    /// Retained events.
    var count: Int64 { get }
    /// The SQLite journal's WAL: the frames the last commit left in it, and its checkpoints so
    /// far. nil for a store without one (PostgreSQL's).
    var wal: (frames: Int32, checkpoints: JournalCheckpointer.Counts)? { get }

    /// Journals `events` and applies the consumer groups' `groups` writes in one transaction,
    /// returning one outcome per event, in order. Nothing is durable (and nothing may be ACKed)
    /// unless this returns. Duplicates (same `event_id`, inside the batch or journaled before)
    /// and conflicts (a `producer_seq` that already belongs to another event) are outcomes, not
    /// errors. A dead letter's `eventIndex` names its `dlq.<group>` event among `events`.
    func commit(events: [PendingEvent], groups: [GroupWrite]) throws -> [AppendOutcome]

    /// Journaled events with `from <= bus_seq <= to`, matching any of `topics` (type prefixes;
    /// empty: all), at most `limit`, examining at most `scanWindow` sequence numbers; never a
    /// type starting with one of `excluding`; with `outcomes`, only events of those type
    /// families whose content's `bus_seq` names an event `producer` published.
    /// - Returns: the events in order, and `through`: every matching event up to it was returned.
    func read(
        from: Int64, to: Int64?, topics: [String], limit: Int, scanWindow: Int64, excluding: [String],
        outcomes: (producer: String, families: [String])?
    ) throws -> (events: [JournaledEvent], through: Int64)

    /// The retained events with these sequence numbers, in order.
    func events(_ busSeqs: [Int64]) throws -> [JournaledEvent]

    /// How many journaled events after `cursor` match `topics` (a group's lag).
    func count(after cursor: Int64, topics: [String]) throws -> Int64

    /// Deletes events received before `olderThan` (Unix ms; never above `keepingAbove`), then
    /// the oldest until the stored size is at most `maxBytes`; at most `chunk` rows per call.
    /// - Returns: how many events were deleted.
    func prune(olderThan: Int64?, maxBytes: Int64?, chunk: Int, keepingAbove: Int64?) throws -> Int

    /// Every group with the rows that rebuild its state machine.
    func loadGroups() throws -> [StoredGroup]

    /// One page of the dead letters `filter` selects, in `at, grp, bus_seq` order (newest first
    /// when `newest`), after `cursor` when given.
    func deadLetterPage(
        _ filter: DeadLetterFilter, after cursor: DeadLetterCursor?, newest: Bool, limit: Int
    ) throws
        -> [DeadLetterRecord]

    /// How many dead letters `filter` selects, by code.
    func deadLetterCodes(_ filter: DeadLetterFilter) throws -> [String: Int]

    /// Dead letters per group and state, for status.
    func deadLetterCounts() throws -> [String: [DeadLetterRecord.State: Int]]

    /// Releases the storage. Nothing may be called after.
    func close() throws
}

extension JournalStore {
    var wal: (frames: Int32, checkpoints: JournalCheckpointer.Counts)? { nil }

    /// Journals a batch with no group writes (`commit(events:groups:)`).
    func append(_ batch: [PendingEvent]) throws -> [AppendOutcome] {
        try commit(events: batch, groups: [])
    }

    /// Writes group rows with no event (acks with nothing to journal).
    func commitGroups(_ writes: [GroupWrite]) throws {
        guard !writes.isEmpty else { return }
        _ = try commit(events: [], groups: writes)
    }

    /// `read` with the default scan window (50,000 sequence numbers).
    func read(
        from: Int64, to: Int64?, topics: [String], limit: Int, excluding: [String] = [],
        outcomes: (producer: String, families: [String])? = nil
    ) throws -> (events: [JournaledEvent], through: Int64) {
        try read(from: from, to: to, topics: topics, limit: limit, scanWindow: 50_000, excluding: excluding, outcomes: outcomes)
    }

    /// `prune` in chunks of 10,000.
    func prune(olderThan: Int64?, maxBytes: Int64?, keepingAbove: Int64? = nil) throws -> Int {
        try prune(olderThan: olderThan, maxBytes: maxBytes, chunk: 10_000, keepingAbove: keepingAbove)
    }

    /// `prune` with nothing kept for groups.
    func prune(olderThan: Int64?, maxBytes: Int64?, chunk: Int) throws -> Int {
        try prune(olderThan: olderThan, maxBytes: maxBytes, chunk: chunk, keepingAbove: nil)
    }

    /// Dead letters of `group` (every group when nil) in `state` (any when nil), oldest first.
    func deadLetters(group: String?, state: DeadLetterRecord.State?, limit: Int = 1000) throws -> [DeadLetterRecord] {
        try deadLetterPage(DeadLetterFilter(group: group, state: state), after: nil, newest: false, limit: limit)
    }

    /// The dead letter of `group` for `busSeq` (in any state), if there is one.
    func deadLetter(group: String, busSeq: Int64) throws -> DeadLetterRecord? {
        try deadLetterPage(DeadLetterFilter(group: group, busSeq: busSeq), after: nil, newest: false, limit: 1).first
    }

    /// One page of dead letters of `group` in `state` (see the other `deadLetterPage`).
    func deadLetterPage(
        group: String?, state: DeadLetterRecord.State?, after cursor: DeadLetterCursor?, newest: Bool, limit: Int
    ) throws -> [DeadLetterRecord] {
        try deadLetterPage(DeadLetterFilter(group: group, state: state), after: cursor, newest: newest, limit: limit)
    }

    /// How many dead letters of `group` in `state` there are, by code.
    func deadLetterCodes(group: String?, state: DeadLetterRecord.State?) throws -> [String: Int] {
        try deadLetterCodes(DeadLetterFilter(group: group, state: state))
    }
}

/// What a dead-letter query selects: a group, a state, a code, those recorded before a
/// moment (Unix milliseconds), one bus_seq; nil selects every one.
struct DeadLetterFilter: Sendable, Hashable {
    var group: String?
    var state: DeadLetterRecord.State?
    var code: String?
    var before: Int64?
    var busSeq: Int64?
}

/// Where a page of dead letters ends: the last record's place in `at, grp, bus_seq` order.
struct DeadLetterCursor: Sendable, Hashable {
    var at: Int64
    var group: String
    var busSeq: Int64

    /// The opaque text `dlq.list` gives as `next`: `<at>:<bus_seq>:<group>` (the group last,
    /// so the text splits unambiguously whatever the group's name).
    var text: String { "\(at):\(busSeq):\(group)" }

    init(at: Int64, group: String, busSeq: Int64) {
        self.at = at
        self.group = group
        self.busSeq = busSeq
    }

    init?(text: String) {
        let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let at = Int64(parts[0]), let busSeq = Int64(parts[1]), !parts[2].isEmpty else { return nil }
        self.init(at: at, group: String(parts[2]), busSeq: busSeq)
    }
}
