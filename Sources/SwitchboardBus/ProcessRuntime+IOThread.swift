public import SwitchboardRuntime
public import ZeroMQ

extension ProcessRuntime {
    /// The process's I/O thread on a ZeroMQ context of its own, added as a service here, so
    /// add it before the services that use its sockets (graceful shutdown reaches it last).
    /// Its `run()` closes the sockets and terminates the context; if the group never runs (a
    /// later start-up step throws), the runtime's release does the same.
    public mutating func ioThread(name: String = "zmq-io") throws -> IOThread {
        own(try IOThread(name: name), name: "zeromq") { await $0.shutdown() }
    }
}
