import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import ZeroMQ

extension BrokerCore {
    /// What a principal may replay (no security: everything). An admin: everything; a kiosk:
    /// only the outcomes of the events it published (dead letters, FileMaker records, ETO
    /// responses: `Policy.kioskOutcomeFamilies`), for its desk; anyone else: everything but dead
    /// letters, which name the events that failed and why for the operators who act on them.
    static func replayFilter(
        security: BrokerSecurity?, principal: String?
    ) -> (
        excluding: [String], outcomes: (producer: String, families: [String])?
    ) {
        guard let security else { return ([], nil) }
        switch security.role(of: principal) {
        case .admin?: return ([], nil)
        case .kiosk?: return ([], (principal ?? "", Policy.kioskOutcomeFamilies))
        default: return (["dlq."], nil)
        }
    }

    func serveReplay() {
        var served = 0
        while served < 64, let message = try? replay.receive(dontWait: true) {
            served += 1
            let frames = message.frames
            guard let identity = frames.first else { continue }
            var command = Envelope.readableCommand(frames.dropFirst())
            var ref: String?
            do {
                let envelope = try Envelope.check(frames.dropFirst(), minimumVersion: configuration.minimumVersion)
                command = envelope.command.rawValue
                guard envelope.command == .fetch else {
                    throw ProtocolError(
                        .unknownCommand, "command \(envelope.command.rawValue) is not accepted on the replay endpoint (FETCH)")
                }
                _ = try envelope.parsed(reference: &ref)
                let fetch = try envelope.decodeHeader(FetchHeader.self)
                ref = fetch.requestID
                try fetch.validate()
                let filter = Self.replayFilter(security: broker.security, principal: message.userID)
                let (events, read) = try journal.read(
                    from: fetch.from, to: fetch.to, topics: fetch.topics, limit: fetch.limit, excluding: filter.excluding,
                    outcomes: filter.outcomes)
                // END promises everything up to `through` was sent: if the client's queue
                // refuses an EVENT, stop there and say so, rather than promise what was dropped.
                var through = read
                var sent = 0
                for event in events {
                    let envelope = Envelope(
                        command: .event, header: event.header, parent: event.parent, metadata: event.metadata, content: event.content)
                    guard reply(identity, envelope, on: replay) else {
                        through = event.busSeq - 1
                        break
                    }
                    sent += 1
                }
                let end = EndHeader(
                    requestID: fetch.requestID, from: fetch.from, through: through, count: sent,
                    head: journal.head, first: journal.first, more: through < min(fetch.to ?? journal.head, journal.head))
                reply(identity, try Envelope(command: .end, header: end), on: replay)
                broker.update { $0.fetches += 1 }
            } catch let error as ProtocolError {
                refuse(identity, error, command: command, ref: ref, socket: replay)
            } catch {
                refuse(identity, ProtocolError(.internalError, "the journal could not be read"), command: command, ref: ref, socket: replay)
                logger.error("replay read failed", metadata: ["error": "\(error)"])
            }
        }
    }
}
