import SwitchboardSecurity
import Testing

/// The authorisation table of protocol/README.md section 13.3, as the pure table it is: every
/// role against every endpoint, event domain, group operation and service, without a broker.
@Suite("Policy: the role table")
struct PolicyTests {
    static let roles: [Role] = [.kiosk, .worker(service: "filemaker"), .auth, .monitor, .admin, .broker]

    @Test("who may connect where: the whole matrix of section 13.3")
    func connect() {
        // Rows: ingest, fanout, replay, service, groups.
        let allowed: [String: [Bool]] = [
            "kiosk": [true, false, true, true, false],
            "worker:filemaker": [true, true, true, true, true],
            "auth": [true, true, true, true, false],
            "monitor": [false, true, true, true, true],
            "admin": [false, true, true, true, true],
            "broker": [false, false, false, false, false],
        ]
        for role in Self.roles {
            for (index, endpoint) in [Endpoint.ingest, .fanout, .replay, .service, .groups].enumerated() {
                let refusal = Policy.connect(role, to: endpoint)
                #expect((refusal == nil) == allowed["\(role)"]?[index], "\(role) → \(endpoint)")
                if let refusal { #expect(refusal.contains("\(role)") && refusal.contains(endpoint.rawValue)) }
            }
        }
    }

    @Test("what each role may publish: its own domains, under its own name only")
    func publish() {
        #expect(Policy.publish(principal: "k1", role: .kiosk, type: "checkin.recorded", producer: "k1") == nil)
        #expect(Policy.publish(principal: "k1", role: .kiosk, type: "person.created", producer: "k1")?.contains("checkin.*") == true)
        #expect(Policy.publish(principal: "k1", role: .kiosk, type: "filemaker.record.written", producer: "k1") != nil)
        #expect(Policy.publish(principal: "k1", role: .kiosk, type: "checkin.recorded", producer: "k2")?.contains("'k2'") == true)
        let worker = Role.worker(service: "filemaker")
        #expect(Policy.publish(principal: "w", role: worker, type: "filemaker.record.written", producer: "w") == nil)
        #expect(Policy.publish(principal: "w", role: worker, type: "eto.response.written", producer: "w") != nil)
        #expect(Policy.publish(principal: "a", role: .auth, type: "auth.refreshed", producer: "a") == nil)
        #expect(Policy.publish(principal: "a", role: .auth, type: "checkin.recorded", producer: "a") != nil)
        for role in [Role.monitor, .admin, .broker] {
            #expect(Policy.publish(principal: "x", role: role, type: "checkin.recorded", producer: "x")?.contains("nothing") == true)
        }
    }

    @Test("group membership: a worker joins its own service's group only; nobody else joins")
    func join() {
        #expect(Policy.join(.worker(service: "eto"), group: "eto") == nil)
        #expect(Policy.join(.worker(service: "eto"), group: "filemaker") != nil)
        for role in [Role.kiosk, .auth, .monitor, .admin, .broker] { #expect(Policy.join(role, group: "eto") != nil, "\(role)") }
    }

    @Test("group operations: the three reads for every role, everything else (dlq.show included) for admin only")
    func groupOperations() {
        let reads = ["groups.list", "dlq.list", "producers.list"]
        let changes = ["groups.create", "groups.reset", "groups.delete", "dlq.show", "dlq.replay", "dlq.drop", "no.such"]
        for role in Self.roles {
            for operation in reads { #expect(Policy.groupOperation(role, operation: operation) == nil, "\(role) \(operation)") }
            for operation in changes {
                #expect((Policy.groupOperation(role, operation: operation) == nil) == (role == .admin), "\(role) \(operation)")
            }
        }
        #expect(Policy.groupOperation(.monitor, operation: "dlq.show")?.contains("personal data") == true)
    }

    @Test("who may serve and call which service")
    func services() {
        #expect(Policy.register(.worker(service: "eto"), service: "eto") == nil)
        #expect(Policy.register(.worker(service: "eto"), service: "auth") != nil)
        #expect(Policy.register(.auth, service: "auth") == nil)
        #expect(Policy.register(.auth, service: "eto") != nil)
        for role in [Role.kiosk, .monitor, .admin, .broker] { #expect(Policy.register(role, service: "eto") != nil, "\(role)") }

        #expect(Policy.call(.worker(service: "eto"), service: "auth", operation: "token.get") == nil)
        #expect(Policy.call(.kiosk, service: "auth", operation: "token.get") != nil)
        // An admin asks auth whether the accounts work, never for a token; a monitor not at all.
        #expect(Policy.call(.admin, service: "auth", operation: "check") == nil)
        #expect(Policy.call(.admin, service: "auth", operation: "status") == nil)
        #expect(Policy.call(.admin, service: "auth", operation: "token.get") != nil)
        #expect(Policy.call(.admin, service: "auth", operation: nil) != nil)
        #expect(Policy.call(.monitor, service: "auth", operation: "check") != nil)
        #expect(Policy.call(.kiosk, service: "auth", operation: "check") != nil)
        #expect(Policy.call(.kiosk, service: "eto", operation: "participants.search") == nil)
        #expect(Policy.call(.kiosk, service: "eto", operation: "participants.add") != nil)
        #expect(Policy.call(.kiosk, service: "eto", operation: nil) != nil)
        #expect(Policy.call(.kiosk, service: "sap", operation: "users.get") != nil)
        for role in Self.roles { #expect(Policy.call(role, service: "mmi.workers", operation: nil) == nil, "\(role)") }
        for role in [Role.monitor, .admin, .broker] {
            #expect(Policy.call(role, service: "eto", operation: "sites.list") != nil, "\(role)")
        }
        #expect(Policy.isReadOnly("participants.lookup") && !Policy.isReadOnly("participants.add") && !Policy.isReadOnly(""))
    }
}
