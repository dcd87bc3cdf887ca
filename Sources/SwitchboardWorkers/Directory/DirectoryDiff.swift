// What one poll of the Directory means, as a value (no I/O): the tests drive `DirectoryDiff.decide`
// with lists and get back what the syncer will publish and remember.
//
// The syncer keeps the last list it accepted (its snapshot). A new list is compared with it by the
// Directory's person id: ids that appeared are `person.created` facts, ids that vanished are
// `person.deleted` facts. Two kinds of change are the syncer's own doing and publish nothing:
// a person it added for a bus request, and one it deleted for one. Normally the handler puts
// those into the snapshot itself, under the same lock as the poll; the pending intents cover a
// crash between the Directory call and that bookkeeping.
//
// The guard: a Directory that answers an empty list, or one missing too many people, is more
// likely broken (a restore, a wrong account, a bug) than emptied on purpose. Such a list is held
// back, published as `directory.sync.suspect`, and accepted only when the next poll returns the
// very same list.

/// One person as the syncer remembers them.
public struct DirectoryEntry: Codable, Sendable, Hashable, Comparable {
    public var id: Int
    public var name: String
    public var office: String

    public init(id: Int, name: String, office: String) {
        self.id = id
        self.name = name
        self.office = office
    }

    public static func < (a: Self, b: Self) -> Bool { a.id < b.id }
}

/// A bus request the syncer started to apply: written before the Directory call, so that a crash
/// after the call is recognised (by the poll and by the redelivered event).
public struct DirectoryIntent: Sendable, Hashable {
    public enum Action: String, Sendable { case add, delete }
    public var eventID: String
    public var action: Action
    public var name: String?
    public var office: String?
    /// The person: known at once for a delete; for an add, once it is found in the Directory.
    public var personID: Int?

    public init(eventID: String, action: Action, name: String? = nil, office: String? = nil, personID: Int? = nil) {
        self.eventID = eventID
        self.action = action
        self.name = name
        self.office = office
        self.personID = personID
    }
}

/// The mass-deletion guard (`--max-missing`).
public struct DirectoryGuard: Sendable, Hashable {
    /// The share of the accepted list that may go missing in one poll, in (0, 1]. A list missing
    /// more, or an empty list after a non-empty one, is suspect. 1 leaves only the empty list.
    public var maxMissing: Double

    public init(maxMissing: Double = 0.5) { self.maxMissing = maxMissing }

    public func isSuspect(previous: Int, current: Int, missing: Int) -> Bool {
        guard previous > 0 else { return false }
        if current == 0 { return true }
        return Double(missing) > maxMissing * Double(previous)
    }
}

/// What the syncer does with one poll's list.
public enum PollDecision: Sendable, Hashable {
    /// Publish the facts, then remember `snapshot` as the accepted list.
    case accept(PollChanges)
    /// Publish `directory.sync.suspect` and nothing else; remember `list` as held back.
    case hold(list: [DirectoryEntry], previous: Int, missing: Int)
    /// The list is the accepted one and nothing is held back: nothing to publish or remember.
    case unchanged
}

public struct PollChanges: Sendable, Hashable {
    /// People to publish as `person.created` facts.
    public var created: [DirectoryEntry] = []
    /// People to publish as `person.deleted` facts (as the snapshot knew them).
    public var deleted: [DirectoryEntry] = []
    /// Same id, new name or office: remembered, not published (v1 has no `person.updated`).
    public var changed: [DirectoryEntry] = []
    /// Add intents whose person the poll found: event id → person id. The person is in
    /// `created` too: a crash cut the request's handler short, maybe before it published the
    /// fact, so the poll publishes it (at least once).
    public var adopted: [String: Int] = [:]
    /// Delete intents whose person the poll found gone: their event ids (the person is in
    /// `deleted` too, for the same reason).
    public var settledDeletes: [String] = []
    /// The list to remember.
    public var snapshot: [DirectoryEntry] = []
    /// True when this is the first list the syncer accepts (no snapshot before).
    public var first = false
    /// True when the list was held back by the previous poll and this one confirmed it.
    public var confirmed = false

    public var isEmpty: Bool { created.isEmpty && deleted.isEmpty && changed.isEmpty && adopted.isEmpty && settledDeletes.isEmpty }
}

public enum DirectoryDiff {
    /// - Parameters:
    ///   - previous: the accepted list; nil before the first poll was accepted.
    ///   - heldBack: the list the previous poll held back, if any.
    ///   - current: what the Directory answered now.
    ///   - intents: bus requests started and not finished.
    public static func decide(
        previous: [DirectoryEntry]?, heldBack: [DirectoryEntry]?, current: [DirectoryEntry], intents: [DirectoryIntent],
        guard rule: DirectoryGuard
    ) -> PollDecision {
        let current = current.sorted()
        let known = Dictionary((previous ?? []).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let now = Set(current.map(\.id))
        let missing = (previous ?? []).filter { !now.contains($0.id) }
        let confirmed = heldBack.map { $0.sorted() == current } ?? false
        if let previous, !confirmed, rule.isSuspect(previous: previous.count, current: current.count, missing: missing.count) {
            return .hold(list: current, previous: previous.count, missing: missing.count)
        }
        var changes = PollChanges(snapshot: current, first: previous == nil, confirmed: confirmed)
        var adds = intents.filter { $0.action == .add }
        for person in current {
            guard let before = known[person.id] else {
                // New to the syncer: its own add (by id once known, else by name and office), or a fact.
                if let index = adds.firstIndex(where: { intent in
                    intent.personID == person.id
                        || (intent.personID == nil && intent.name == person.name && intent.office == person.office)
                }) {
                    changes.adopted[adds[index].eventID] = person.id
                    adds.remove(at: index)
                }
                changes.created.append(person)
                continue
            }
            if before.name != person.name || before.office != person.office { changes.changed.append(person) }
        }
        for person in missing {
            changes.settledDeletes += intents.filter { $0.action == .delete && $0.personID == person.id }.map(\.eventID)
            changes.deleted.append(person)
        }
        return changes.isEmpty && !changes.first && !changes.confirmed && heldBack == nil ? .unchanged : .accept(changes)
    }
}
