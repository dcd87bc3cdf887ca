import SwitchboardRuntime
import Testing

/// The restart policy driven with instants: no process, no sleeping.
@Suite("Restart policy: back-off, reset after a stable run, the limit within a window")
struct RestartPolicyTests {
    let start = ContinuousClock.now

    func at(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int64(seconds * 1000)) }

    /// Runs the program from `started` for `ran` seconds and returns what the policy says of its exit.
    func run(_ policy: inout RestartPolicy, from started: Double, for ran: Double) -> RestartPolicy.Action {
        policy.started(at: at(started))
        return policy.exited(at: at(started + ran))
    }

    @Test("a program that dies at once is restarted after 1 s, 2 s, 4 s, 8 s, 16 s, then given up on: 5 restarts in 5 min")
    func backOffThenGiveUp() {
        var policy = RestartPolicy()
        var now = 0.0
        var delays: [Duration] = []
        for restart in 1...5 {
            let action = run(&policy, from: now, for: 0.5)
            guard case .restart(let delay, let number, let limit, let window) = action else {
                Issue.record("restart \(restart): \(action)")
                return
            }
            #expect(number == restart && limit == 5 && window == .seconds(300))
            delays.append(delay)
            now += 0.5 + Double(delay.components.seconds)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16)])
        #expect(run(&policy, from: now, for: 0.5) == .giveUp(restarts: 5, window: .seconds(300)))
        // Given up stays given up, even much later.
        #expect(run(&policy, from: now + 3600, for: 0.5) == .giveUp(restarts: 0, window: .seconds(300)))
    }

    @Test("the delay doubles up to 30 s and stays there while the restarts are spread beyond the window")
    func capped() {
        var policy = RestartPolicy(.init(limit: 100))
        var now = 0.0
        var delays: [Duration] = []
        for _ in 1...8 {
            guard case .restart(let delay, _, _, _) = run(&policy, from: now, for: 10) else {
                Issue.record("gave up")
                return
            }
            delays.append(delay)
            now += 10 + Double(delay.components.seconds)
        }
        #expect(delays == [1, 2, 4, 8, 16, 30, 30, 30].map { Duration.seconds($0) })
    }

    @Test("a run of 60 s or more starts the back-off afresh; 59.9 s does not")
    func stableRunResets() {
        var policy = RestartPolicy()
        #expect(run(&policy, from: 0, for: 1) == .restart(after: .seconds(1), restart: 1, limit: 5, window: .seconds(300)))
        #expect(run(&policy, from: 2, for: 1) == .restart(after: .seconds(2), restart: 2, limit: 5, window: .seconds(300)))
        #expect(run(&policy, from: 5, for: 59.9) == .restart(after: .seconds(4), restart: 3, limit: 5, window: .seconds(300)))
        #expect(run(&policy, from: 69, for: 60) == .restart(after: .seconds(1), restart: 4, limit: 5, window: .seconds(300)))
        #expect(run(&policy, from: 130, for: 1) == .restart(after: .seconds(2), restart: 5, limit: 5, window: .seconds(300)))
    }

    @Test("restarts older than the window no longer count: a sixth crash more than 5 min after the first is restarted")
    func slidingWindow() {
        var policy = RestartPolicy()
        // Five crashes, each after a stable run (delay 1 s), at 61, 123, 185, 247 and 309 s.
        var now = 0.0
        for restart in 1...5 {
            #expect(run(&policy, from: now, for: 61) == .restart(after: .seconds(1), restart: restart, limit: 5, window: .seconds(300)))
            now += 62
        }
        // At 371 s the restart at 61 s is 310 s old: four remain in the window.
        #expect(run(&policy, from: now, for: 61) == .restart(after: .seconds(1), restart: 5, limit: 5, window: .seconds(300)))
        #expect(policy.restartsWithin(window: at(now + 61)) == 5)
    }

    @Test("the limit counts restarts in the window whatever their delays: six quick crashes within a minute give up")
    func limitWithinWindow() {
        var policy = RestartPolicy(.init(initialDelay: .seconds(1), maximumDelay: .seconds(1), limit: 5, window: .seconds(60)))
        for restart in 1...5 {
            #expect(
                run(&policy, from: Double(restart) * 5, for: 1)
                    == .restart(after: .seconds(1), restart: restart, limit: 5, window: .seconds(60)))
        }
        #expect(run(&policy, from: 30, for: 1) == .giveUp(restarts: 5, window: .seconds(60)))
    }

    @Test("an exit with no start recorded (it died before it was seen to start) still counts and backs off")
    func exitWithoutStart() {
        var policy = RestartPolicy()
        #expect(policy.exited(at: at(0)) == .restart(after: .seconds(1), restart: 1, limit: 5, window: .seconds(300)))
        #expect(policy.exited(at: at(1)) == .restart(after: .seconds(2), restart: 2, limit: 5, window: .seconds(300)))
    }
}
