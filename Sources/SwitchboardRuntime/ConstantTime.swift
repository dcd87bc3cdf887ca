// Shared by the two pages that hold secrets: the monitor's dashboard (its token) and the front
// desk (sessions, CSRF tokens, password hashes).

/// Comparison of secrets whose time does not depend on where they differ.
public enum ConstantTime {
    public static func equal(_ offered: String, _ secret: String) -> Bool {
        equal(Array(offered.utf8), Array(secret.utf8))
    }

    public static func equal(_ offered: [UInt8], _ secret: [UInt8]) -> Bool {
        // Every byte of the secret is looked at whatever the offer's length; only that length
        // (which the offerer knows) changes the time.
        var difference = UInt8(offered.count == secret.count ? 0 : 1)
        for index in secret.indices {
            difference |= secret[index] ^ (index < offered.count ? offered[index] : 0)
        }
        return difference == 0
    }
}
