/// Where each program serves `/metrics` and `/health` unless told otherwise: 127.0.0.1 at
/// `defaultPort`. One table, so the programs' defaults and `switchboard up`'s layout (its
/// `--admin-port` plus each program's `offset`) cannot drift apart.
public enum AdminPort: String, Sendable, CaseIterable {
    // In port order: the offset of each is its place here.
    case broker, kiosk
    /// Reserved: `switchboard-monitor` serves no admin endpoints (its `web` dashboard listens
    /// on 9570).
    case monitor
    case auth, filemaker, eto, directory
    /// The front desk under `switchboard up`; run alone it is a kiosk program and takes the
    /// kiosk's port.
    case desk

    /// The first admin port: the broker's.
    public static let base = 9560

    /// Where this program's port is after `base`.
    public var offset: Int { Self.allCases.firstIndex(of: self) ?? 0 }

    /// The port this program serves on when nothing else is said.
    public var defaultPort: Int { Self.base + offset }

    /// The port of `program` (`broker`, `auth`, `filemaker`, …), if it has one.
    public static func of(_ program: String) -> AdminPort? {
        AdminPort(rawValue: program)
    }
}
