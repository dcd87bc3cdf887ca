// The sessions `auth` holds, as a service of its program's `ServiceGroup`: kept alive while the
// program runs, logged out when it stops. Put it before the Majordomo worker that hands out
// tokens: a group stops its services in reverse order, so the worker has answered its last
// `token.get` before any session is logged out, and after it (before the outbox sender) so the
// events the log-outs publish are still sent.

public import Logging
public import ServiceLifecycle

public struct AuthSessions: Service {
    public let auth: AuthService
    public let keepAliveInterval: Duration
    let logger: Logger

    public init(auth: AuthService, keepAliveInterval: Duration, logger: Logger) {
        self.auth = auth
        self.keepAliveInterval = keepAliveInterval
        self.logger = logger
    }

    public func run() async {
        await cancelWhenGracefulShutdown { [auth, keepAliveInterval] in
            await auth.keepAlive(every: keepAliveInterval)
        }
        logger.info("auth stopping: logging out")
        // FileMaker frees a session's slot only on log-out; the others forget it at once.
        await auth.logOutAll()
    }
}
