// `switchboard-directory`'s logic: the Directory and the bus's people events, kept in step both
// ways (protocol/README.md section 16.3).
//
// - Directory → bus: `poll()` lists the account's people, decides with `DirectoryDiff` against
//   the store's snapshot, puts the facts (`person.created`, `person.deleted`, source `directory`)
//   into the outbox, then remembers the list. Outbox first: a crash in between publishes the same
//   facts again (at least once), never loses them.
// - bus → Directory: `handle(_:)` applies the requests of group `directory` (`person.*` whose
//   source is not `directory`): looks, writes once, publishes the write as one fact (with the
//   Directory's id), and records the request as applied together with the snapshot change, so
//   the next poll does not report the syncer's own write a second time.
//
// The two run under one lock: a poll that listed the people before a handler's write and diffed
// after it would report the write as a change.

import Foundation
public import Logging
public import SwitchboardBackends
public import SwitchboardBus
import SwitchboardCredentials
import SwitchboardHTTP
import SwitchboardProtocol
import Synchronization

/// A first-come, first-served lock that waits without blocking a thread.
final class AsyncLock: Sendable {
    private struct State {
        var locked = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state in
                if state.locked {
                    state.waiters.append(continuation)
                    return false
                }
                state.locked = true
                return true
            }
            if now { continuation.resume() }
        }
        defer {
            let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if state.waiters.isEmpty {
                    state.locked = false
                    return nil
                }
                return state.waiters.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}

/// Counts a syncer keeps, for logs and tests.
public struct DirectorySyncCounts: Sendable, Hashable {
    public var polls = 0
    public var failedPolls = 0
    public var held = 0
    public var published = 0
}

public final class DirectorySyncer: EventHandler, Sendable {
    /// What a poll did.
    public enum PollOutcome: Sendable, Hashable {
        case decided(PollDecision)
        case failed(String)
    }

    public let client: DirectoryClient
    public let store: DirectorySyncStore
    /// The Directory user whose list this is (its key comes from auth).
    public let account: String
    public let guardRule: DirectoryGuard
    let key: CredentialSource<Directory.APIKey>
    let publish: @Sendable ([Outbox.NewEvent]) async throws -> Void
    let logger: Logger
    private let lock = AsyncLock()
    private let state = Mutex(DirectorySyncCounts())

    /// - Parameter publish: puts events into the worker's outbox, all or none.
    public init(
        client: DirectoryClient, key: CredentialSource<Directory.APIKey>, account: String, store: DirectorySyncStore,
        guard guardRule: DirectoryGuard, logger: Logger, publish: @escaping @Sendable ([Outbox.NewEvent]) async throws -> Void
    ) {
        self.client = client
        self.key = key
        self.account = account
        self.store = store
        self.guardRule = guardRule
        self.logger = logger
        self.publish = publish
    }

    public var counts: DirectorySyncCounts { state.withLock { $0 } }

    /// The ordering key of every event about one Directory person.
    static func eventKey(_ personID: Int) -> String { "directory-person-\(personID)" }

    // MARK: Directory → bus

    /// Lists the people once and publishes what changed. Never throws: a failure is logged and
    /// the next poll tries again from the same snapshot.
    @discardableResult
    public func poll() async -> PollOutcome {
        await lock.withLock {
            let outcome: PollOutcome
            do {
                outcome = .decided(try await pollLocked())
            } catch {
                logger.warning("directory poll failed; the next poll tries again", metadata: ["error": "\(error)"])
                outcome = .failed("\(error)")
            }
            state.withLock { counts in
                counts.polls += 1
                if case .failed = outcome { counts.failedPolls += 1 }
            }
            return outcome
        }
    }

    private func pollLocked() async throws -> PollDecision {
        let people = try await client.people(auth: key).map { DirectoryEntry(id: $0.id, name: $0.name, office: $0.office) }
        let stored = try await store.pollState()
        let decision = DirectoryDiff.decide(
            previous: stored.snapshot, heldBack: stored.heldBack, current: people, intents: stored.intents, guard: guardRule)
        switch decision {
        case .unchanged:
            break
        case .hold(let list, let previous, let missing):
            let suspect = DirectorySyncSuspect(
                account: account, previous: previous, current: list.count, missing: missing, maxMissing: guardRule.maxMissing,
                at: Timestamp.now())
            try await publish([
                Outbox.NewEvent(type: DirectorySyncSuspect.type, schema: DirectorySyncSuspect.schema, content: try WireJSON.encode(suspect))
            ])
            try await store.holdBack(list)
            state.withLock { $0.held += 1 }
            logger.warning(
                "directory list held back: too many people missing at once; publishing nothing until the next poll sees the same list",
                metadata: ["previous": "\(previous)", "current": "\(list.count)", "missing": "\(missing)"])
        case .accept(let changes):
            var events: [Outbox.NewEvent] = []
            for person in changes.created {
                let fact = PersonCreated(personID: person.id, name: person.name, office: person.office, source: directorySource)
                events.append(
                    .init(
                        type: PersonCreated.type, schema: PersonCreated.schema, content: try WireJSON.encode(fact),
                        key: Self.eventKey(person.id)))
            }
            for person in changes.deleted {
                let fact = PersonDeleted(personID: person.id, name: person.name, office: person.office, source: directorySource)
                events.append(
                    .init(
                        type: PersonDeleted.type, schema: PersonDeleted.schema, content: try WireJSON.encode(fact),
                        key: Self.eventKey(person.id)))
            }
            if !events.isEmpty { try await publish(events) }
            try await store.accept(changes)
            state.withLock { $0.published += events.count }
            if !events.isEmpty || changes.confirmed || changes.first {
                logger.info(
                    changes.confirmed ? "directory list confirmed by a second poll" : "directory changes published",
                    metadata: [
                        "created": "\(changes.created.count)", "deleted": "\(changes.deleted.count)", "people": "\(changes.snapshot.count)",
                    ])
            }
        }
        return decision
    }

    // MARK: bus → Directory

    public func handle(_ event: WorkerEvent) async -> Settlement {
        let header = event.header
        switch (header.type, header.schema) {
        case (PersonCreated.type, PersonCreated.schema):
            guard let request = try? JSONDecoder().decode(PersonCreated.self, from: event.content) else {
                return .deadLetter(code: "invalid-content", message: "the content is not a \(PersonCreated.schema)")
            }
            if request.isFact { return .done }
            if let problem = request.problem { return .deadLetter(code: "invalid-content", message: problem) }
            return await lock.withLock { await self.add(request, eventID: event.eventID) }
        case (PersonDeleted.type, PersonDeleted.schema):
            guard let request = try? JSONDecoder().decode(PersonDeleted.self, from: event.content) else {
                return .deadLetter(code: "invalid-content", message: "the content is not a \(PersonDeleted.schema)")
            }
            if request.isFact { return .done }
            if let problem = request.problem { return .deadLetter(code: "invalid-content", message: problem) }
            return await lock.withLock { await self.delete(request, eventID: event.eventID) }
        default:
            // Another person.* event (a later version, person.updated): not the syncer's to apply.
            logger.debug("not a request the syncer applies", metadata: ["type": "\(header.type)", "schema": "\(header.schema)"])
            return .done
        }
    }

    /// The Directory's list, refused when the guard would hold it back: a write decided on a
    /// list that lost half its people could duplicate a person or miss one.
    private func trustedPeople() async throws -> TrustedList {
        let people = try await client.people(auth: key)
        // A store that cannot be read must not switch the guard off: the error goes up (retry).
        let snapshot = try await store.snapshot()
        if let snapshot {
            let now = Set(people.map(\.id))
            let missing = snapshot.filter { !now.contains($0.id) }.count
            if guardRule.isSuspect(previous: snapshot.count, current: people.count, missing: missing) {
                return .refused(
                    .retry(
                        after: nil, code: "directory-suspect",
                        message: "the Directory listed \(people.count) people where \(snapshot.count) were known; not writing on that list")
                )
            }
        }
        return .people(people)
    }

    private enum TrustedList {
        case people([Directory.Person])
        case refused(Settlement)
    }

    private func add(_ request: PersonCreated, eventID: String) async -> Settlement {
        do {
            if let recorded = try await store.intent(eventID), recorded.done { return .done }
            let people: [Directory.Person]
            switch try await trustedPeople() {
            case .people(let list): people = list
            case .refused(let settlement): return settlement
            }
            let intent = DirectoryIntent(eventID: eventID, action: .add, name: request.name, office: request.office)
            // Look before writing: the Directory has no field for the event id, so a person with
            // this name and office already there (from an earlier delivery whose bookkeeping a
            // crash cut short, or added by hand) satisfies the request.
            if let existing = people.first(where: { $0.name == request.name && $0.office == request.office }) {
                try await publishFact(created: true, DirectoryEntry(id: existing.id, name: existing.name, office: existing.office))
                try await store.finish(intent, added: DirectoryEntry(id: existing.id, name: existing.name, office: existing.office))
                logger.info(
                    "person was already in the Directory", metadata: ["event_id": "\(eventID)", "directory.person": "\(existing.id)"])
                return .done
            }
            try await store.begin(intent)
            let person = try await client.addPerson(name: request.name, office: request.office, auth: key)
            try await publishFact(created: true, DirectoryEntry(id: person.id, name: person.name, office: person.office))
            try await store.finish(intent, added: DirectoryEntry(id: person.id, name: person.name, office: person.office))
            logger.info("person added to the Directory", metadata: ["event_id": "\(eventID)", "directory.person": "\(person.id)"])
            return .done
        } catch let error as HTTPError {
            return SettlementRules.directory.settlement(for: error)
        } catch {
            return .retry(after: .seconds(1), code: "store", message: "the syncer's store failed: \(error)")
        }
    }

    private func delete(_ request: PersonDeleted, eventID: String) async -> Settlement {
        do {
            let recorded = try await store.intent(eventID)
            if let recorded, recorded.done { return .done }
            let people: [Directory.Person]
            switch try await trustedPeople() {
            case .people(let list): people = list
            case .refused(let settlement): return settlement
            }
            let target: Int
            if let id = request.personID {
                if let person = people.first(where: { $0.id == id }) {
                    // Reasons name people by id: a person's name is personal data (the monitor hides
                    // `name` too), kept in the event for `dlq show`.
                    if let name = request.name, name != person.name {
                        return .deadLetter(
                            code: "person-mismatch",
                            message: "Directory person \(id) has another name than the request's; nothing was deleted")
                    }
                    if let office = request.office, office != person.office {
                        return .deadLetter(
                            code: "person-mismatch",
                            message: "Directory person \(id) is at office '\(person.office)', not '\(office)'; nothing was deleted")
                    }
                }
                target = id
            } else if let earlier = recorded?.intent.personID {
                // An earlier delivery chose the person (and may have deleted them already).
                target = earlier
            } else {
                let matches = people.filter { $0.name == request.name && $0.office == request.office }
                guard matches.count == 1 else {
                    return .deadLetter(
                        code: "person-unmatched",
                        message: matches.isEmpty
                            ? "no Directory person at office '\(request.office ?? "")' has the request's name"
                            : "\(matches.count) Directory people at office '\(request.office ?? "")' have the request's name (ids \(matches.map { String($0.id) }.joined(separator: ", "))); name one by person_id"
                    )
                }
                target = matches[0].id
            }
            let intent = DirectoryIntent(eventID: eventID, action: .delete, name: request.name, office: request.office, personID: target)
            try await store.begin(intent)
            if try await deleteIfPresent(target) {
                logger.info("person deleted from the Directory", metadata: ["event_id": "\(eventID)", "directory.person": "\(target)"])
            } else {
                logger.info(
                    "person was already gone from the Directory", metadata: ["event_id": "\(eventID)", "directory.person": "\(target)"])
            }
            // The fact names the person as last known: from the list just read, else from the
            // last accepted one. A person this syncer never saw was never published: no fact.
            let listed = people.first { $0.id == target }.map { DirectoryEntry(id: $0.id, name: $0.name, office: $0.office) }
            let remembered = try await store.snapshot()?.first { $0.id == target }
            if let known = listed ?? remembered { try await publishFact(created: false, known) }
            try await store.finish(intent, removed: target)
            return .done
        } catch let error as HTTPError {
            return SettlementRules.directory.settlement(for: error)
        } catch {
            return .retry(after: .seconds(1), code: "store", message: "the syncer's store failed: \(error)")
        }
    }

    /// The fact a request's change makes (section 16.3): the poll stays silent about the syncer's
    /// own writes, so this is the one fact, and it carries the Directory's id (consumers such as
    /// the FileMaker staff mirror key on it). Outbox first, then the store: a crash in between
    /// publishes it again on the redelivery (at least once).
    private func publishFact(created: Bool, _ person: DirectoryEntry) async throws {
        let event: Outbox.NewEvent
        if created {
            let fact = PersonCreated(personID: person.id, name: person.name, office: person.office, source: directorySource)
            event = .init(
                type: PersonCreated.type, schema: PersonCreated.schema, content: try WireJSON.encode(fact), key: Self.eventKey(person.id))
        } else {
            let fact = PersonDeleted(personID: person.id, name: person.name, office: person.office, source: directorySource)
            event = .init(
                type: PersonDeleted.type, schema: PersonDeleted.schema, content: try WireJSON.encode(fact), key: Self.eventKey(person.id))
        }
        try await publish([event])
        state.withLock { $0.published += 1 }
    }

    /// One people list at start: a wrong account or URL stops the syncer with the setting named;
    /// an auth or Directory that is not up yet is tried again.
    public static func startCheck(
        client: DirectoryClient, key: CredentialSource<Directory.APIKey>, account: String, url: String
    ) async throws(WorkerConfigurationError) {
        do {
            _ = try await client.people(auth: key)
        } catch {
            let text = error.description
            if error.code == .credentialUnavailable, text.contains("unknown-account") {
                throw WorkerConfigurationError("--account: auth holds no Directory account '\(account)': \(text)")
            }
            if error.code == .credentialUnavailable, text.contains("login-failed") {
                throw WorkerConfigurationError("--account: auth cannot log in to the Directory as '\(account)': \(text)")
            }
            if error.code == .invalidRequest || error.code == .invalidConfiguration {
                throw WorkerConfigurationError("--url: \(text)")
            }
            throw WorkerConfigurationError("cannot list the Directory's people at \(url): \(text)", retryable: true)
        }
    }

    /// Deletes the person; false when the Directory answers 404 for them (gone already: an
    /// earlier delivery, or by hand), which satisfies a request to delete.
    private func deleteIfPresent(_ id: Int) async throws(HTTPError) -> Bool {
        do {
            try await client.deletePerson(id: id, auth: key)
            return true
        } catch {
            if error.status == 404, error.code != .credentialRejected { return false }
            throw error
        }
    }
}
