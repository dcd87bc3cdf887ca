import Synchronization

/// The SubjectIDs (what TouchPoint responses are recorded against) of the participants this
/// worker read lately, by site and CLID, so that a participant's next check-in within
/// `lifetime` skips `GET Actor.svc/participant/{CLID}`: a check-in by id then costs one ETO call
/// (the write), one by name two (the search, the write).
///
/// ETO never gives a participant another SubjectID. What the lifetime bounds is a participant
/// removed from the site meanwhile: its next check-in reaches ETO's write (which refuses it)
/// rather than the read (`participant-unmatched`). Entries hold ids only, never a name. At
/// `capacity` the expired entries go, then, if that is not enough, all of them: the memory stays
/// bounded, and the next check-ins read their participants again.
final class ETOSubjects: Sendable {
    struct Key: Hashable {
        var site: Int
        var participant: Int
    }

    struct Entry {
        var subject: Int
        var until: ContinuousClock.Instant
    }

    let lifetime: Duration
    let capacity: Int
    private let entries = Mutex<[Key: Entry]>([:])

    init(lifetime: Duration = .seconds(600), capacity: Int = 20_000) {
        self.lifetime = lifetime
        self.capacity = max(1, capacity)
    }

    /// The participant's SubjectID, when it was read less than `lifetime` ago.
    func subject(site: Int, participant: Int) -> Int? {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[Key(site: site, participant: participant)], entry.until > now else { return nil }
            return entry.subject
        }
    }

    func remember(_ subject: Int, site: Int, participant: Int) {
        guard lifetime > .zero else { return }
        let now = ContinuousClock.now
        entries.withLock { entries in
            let key = Key(site: site, participant: participant)
            if entries[key] == nil, entries.count >= capacity {
                entries = entries.filter { $0.value.until > now }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = Entry(subject: subject, until: now + lifetime)
        }
    }

    var count: Int { entries.withLock { $0.count } }
}
