/// Lets other tasks run every `every` rounds of a long synchronous loop.
///
/// Swift Testing runs every test at once on the cooperative pool, which has one thread per core
/// (two on our CI machines). A test that spends seconds in a CPU-bound loop without suspending
/// holds one of those threads the whole time; two such tests stop every other test's timers,
/// heartbeats and socket continuations, and the tests that measure liveness in tens of
/// milliseconds fail. Loops of thousands of rounds call this so the pool stays shared.
public func yieldNowAndThen(_ round: Int, every: Int = 500) async {
    if round % every == 0 { await Task.yield() }
}
