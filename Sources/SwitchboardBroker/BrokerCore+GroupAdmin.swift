// Operators' requests on the groups endpoint (protocol/README.md, 15.6): the REQUEST read, the
// role checked, the content read into a `GroupAdminRequest`; `GroupCoordinator` runs it and this
// file carries out what it says, commits, and sends the REPLY (12.3). Every change is journaled
// as a `groups.changed` event naming who asked, so the journal is the audit trail.

import Foundation
import Logging
import SwitchboardProtocol
import SwitchboardSecurity
import SwitchboardStorage
import ZeroMQ

extension BrokerCore {
    func groupRequest(_ identity: Data, _ parsed: ParsedEnvelope, principal: String?, now: ContinuousClock.Instant) {
        let envelope = parsed.envelope
        let header: RequestHeader
        do {
            header = try envelope.decodeHeader(RequestHeader.self)
            try header.validate()
        } catch {
            let reply = ReplyHeader(
                requestID: parsed.reference, status: 400,
                error: ServiceFailure(code: "bad-request", message: error.message))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
            return
        }
        do {
            if let security = broker.security {
                guard let role = security.role(of: principal) else {
                    security.refused("revoked", principal: principal, endpoint: .groups, reason: "principal is no longer allowed")
                    throw GroupRequestFailure(
                        status: 403, code: "forbidden", message: "principal '\(principal ?? "?")' is no longer allowed")
                }
                if let reason = Policy.groupOperation(role, operation: header.operation) {
                    security.refused("group", principal: principal, endpoint: .groups, reason: reason)
                    throw GroupRequestFailure(status: 403, code: "forbidden", message: reason)
                }
            }
            guard case .object(let input) = parsed.content else { throw GroupRequestFailure.badRequest("content must be a JSON object") }
            guard let operation = GroupOperation(rawValue: header.operation) else {
                let known = GroupOperation.allCases.map(\.rawValue).joined(separator: ", ")
                throw GroupRequestFailure(
                    status: 404, code: "unknown-operation",
                    message: "the groups endpoint has no operation '\(header.operation)' (\(known))")
            }
            let request: GroupAdminRequest
            do {
                request = try GroupAdminRequest(operation, content: input)
            } catch {
                throw GroupRequestFailure.badRequest(error.message)
            }
            // Dead letters made earlier in this loop iteration are read only once committed.
            try flushGroups()
            let (result, actions) = try GroupCoordinator(journal: journal).run(
                request, by: principal ?? "-", book: &groups, producers: producers, now: now)
            for action in actions {
                switch action {
                case .perform(let deliveries, let group): try perform(deliveries, group: group, now: now)
                case .audit(let change): audit(change)
                case .forget(let group): metrics.dropGroup(group)
                }
            }
            // The change is on disk before the operator hears it is done.
            try flushGroups()
            if operation.changes, groups.hasWritesDue {
                // The commit failed (flushGroups keeps what it could not commit): say so, not 200.
                let cause = groupCommitOutage.lastFault?.cause.rawValue ?? "an error"
                throw GroupRequestFailure(
                    status: 503, code: "unavailable",
                    message:
                        "done, but not on disk: the journal could not store it (\(cause)); it is committed with the next commit that succeeds, and lost if the broker stops before"
                )
            }
            answer(identity, ReplyHeader(requestID: header.requestID, status: 200), parent: envelope.header, content: try result.encoded())
        } catch let failure as GroupRequestFailure {
            let reply = ReplyHeader(
                requestID: header.requestID, status: failure.status, error: ServiceFailure(code: failure.code, message: failure.message))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
        } catch {
            logger.error("group request failed", metadata: ["operation": "\(header.operation)", "error": "\(error)"])
            let reply = ReplyHeader(
                requestID: header.requestID, status: 500,
                error: ServiceFailure(code: "internal", message: "the broker could not do it: \(error)", retryable: true))
            answer(identity, reply, parent: envelope.header, content: Envelope.emptyObject)
        }
    }

    func answer(_ identity: Data, _ header: ReplyHeader, parent: Data, content: Data) {
        guard let data = try? WireJSON.encode(header) else { return }
        reply(identity, Envelope(command: .reply, header: data, parent: parent, content: content), on: groupSocket)
    }

    /// A `groups.changed` event: who changed which group how (journaled with the next commit).
    func audit(_ change: GroupAudit) {
        var content = change.extra
        content["action"] = .string(change.action)
        content["group"] = .string(change.group)
        content["by"] = .string(change.by)
        content["at"] = .string(Timestamp.now())
        guard let event = brokerEvent(type: "groups.changed", schema: "groups.changed/1", content: content) else { return }
        groups.audits.append(event)
        logger.notice("group changed", metadata: ["action": "\(change.action)", "group": "\(change.group)", "by": "\(change.by)"])
    }
}
